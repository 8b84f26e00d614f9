// One side of a conflict ("Mine: Gasket replaced"): the side's name muted, its value in full;
// bold when it is the chosen one.
import QtQuick
import QtQuick.Layouts

ColumnLayout {
    id: value
    property string side: ""
    property string text: ""
    property bool chosen: false
    spacing: 0
    Layout.fillWidth: true
    Layout.preferredWidth: 1
    Layout.alignment: Qt.AlignTop
    Accessible.role: Accessible.StaticText
    Accessible.name: side + ": " + text
    FsCaption { text: value.side + (value.chosen ? " (chosen)" : ""); Layout.fillWidth: true; Accessible.ignored: true }
    FsLabel {
        text: value.text === "" ? "(empty)" : value.text
        font.bold: value.chosen
        color: value.text === "" ? Theme.textMuted : Theme.text
        wrapMode: Text.Wrap
        Layout.fillWidth: true
        Accessible.ignored: true
    }
}
