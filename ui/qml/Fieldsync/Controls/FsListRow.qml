// A tappable row of a short list: its title in bold, a detail line, an optional note. Reads to
// a screen reader as "<title>, <detail>". At least 56 px tall; it grows, never cuts text.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

ItemDelegate {
    id: row
    property string title: ""
    property string detail: ""
    property string note: ""
    implicitHeight: Math.max(Theme.rowHeight, lines.implicitHeight + topPadding + bottomPadding)
    topPadding: Theme.spacingS
    bottomPadding: Theme.spacingS
    leftPadding: Theme.spacingM
    rightPadding: Theme.spacingM
    Accessible.role: Accessible.ListItem
    Accessible.name: detail ? title + ", " + detail : title
    Accessible.description: note
    background: Rectangle {
        radius: Theme.radius
        color: row.down ? Theme.divider : row.highlighted ? Theme.surface : Theme.surfaceRaised
        border.width: row.highlighted ? 2 : Theme.borderWidth
        border.color: row.highlighted ? Theme.accent : Theme.divider
    }
    contentItem: ColumnLayout {
        id: lines
        spacing: 2
        FsLabel { text: row.title; font.bold: true; wrapMode: Text.WordWrap; Layout.fillWidth: true; Accessible.ignored: true }
        FsCaption { visible: text !== ""; text: row.detail; Layout.fillWidth: true; Accessible.ignored: true }
        FsCaption { visible: text !== ""; text: row.note; font.italic: true; Layout.fillWidth: true; Accessible.ignored: true }
    }
}
