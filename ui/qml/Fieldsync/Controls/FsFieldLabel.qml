// A form field's visible label, with an optional muted hint ("required", "YYYY-MM-DD"). The
// input under it carries the same words as its accessible name, so this one is not read twice.
import QtQuick
import QtQuick.Layouts

RowLayout {
    property string text: ""
    property string hint: ""
    spacing: Theme.spacingS
    Layout.fillWidth: true
    FsLabel { text: parent.text; font.bold: true; Accessible.ignored: true }
    FsCaption {
        visible: parent.hint !== ""
        text: parent.hint
        Layout.fillWidth: true
        Accessible.ignored: true
    }
}
