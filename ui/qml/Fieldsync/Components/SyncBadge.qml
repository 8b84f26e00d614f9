// A work order's sync state as a pill: its icon and its word, white on the state's colour
// (in high contrast, an outline in the text colour).
import QtQuick
import QtQuick.Layouts
import Fieldsync.Controls

Rectangle {
    id: pill
    property string kind: "synced"
    property string text: ""
    implicitWidth: row.implicitWidth + 2 * Theme.spacingS
    implicitHeight: Math.max(28, row.implicitHeight + 2 * Theme.spacingXs)
    radius: height / 2
    color: Theme.highContrast ? "transparent" : Theme.syncColor(kind)
    border.width: Theme.highContrast ? 2 : 0
    border.color: Theme.text
    Accessible.role: Accessible.StaticText
    Accessible.name: text

    RowLayout {
        id: row
        anchors.centerIn: parent
        width: Math.min(implicitWidth, pill.width - 2 * Theme.spacingS)
        spacing: Theme.spacingXs
        SyncIcon { kind: pill.kind; size: 18 }
        FsLabel {
            text: pill.text
            color: Theme.highContrast ? Theme.text : Theme.syncTextColor(pill.kind)
            font.bold: true
            font.pixelSize: Theme.fontCaption
            elide: Text.ElideRight
            Layout.fillWidth: true
            Accessible.ignored: true
        }
    }
}
