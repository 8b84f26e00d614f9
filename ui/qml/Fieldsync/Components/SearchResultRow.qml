// One server search result: title, status and where/who, whether this device holds it, and
// its actions ("Open", "Keep offline"). Reads as "<title>, <Available offline|Online only>".
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Fieldsync.Controls

FsCard {
    id: row
    required property var result
    signal opened(string entityId)
    signal keepOffline(string entityId)
    padding: Theme.spacingS
    Accessible.role: Accessible.ListItem
    Accessible.name: row.result.title + ", " + row.result.offlineText
    Accessible.description: row.result.subtitle

    ColumnLayout {
        anchors.left: parent.left
        anchors.right: parent.right
        spacing: Theme.spacingXs
        FsLabel {
            text: row.result.title
            font.bold: true
            wrapMode: Text.WordWrap
            Layout.fillWidth: true
            Accessible.ignored: true
        }
        FsCaption {
            text: row.result.subtitle ? row.result.statusText + " · " + row.result.subtitle
                                      : row.result.statusText
            Layout.fillWidth: true
            Accessible.ignored: true
        }
        FsMark {
            objectName: "resultOfflineMark"
            kind: row.result.held ? "offline" : "pinned"
            iconName: row.result.held ? "offline" : "search"
            label: row.result.offlineText
            Layout.fillWidth: true
            Accessible.ignored: true
        }
        FsActionGrid {
            maxColumns: 2
            FsButton {
                objectName: "openResultButton"
                text: "Open"
                Layout.fillWidth: true
                Layout.preferredWidth: 1
                Accessible.name: "Open " + row.result.title
                onClicked: row.opened(row.result.entityId)
            }
            FsButton {
                objectName: "keepResultOfflineButton"
                visible: !row.result.held
                text: "Keep offline"
                Layout.fillWidth: true
                Layout.preferredWidth: 1
                Accessible.name: "Keep offline: " + row.result.title
                onClicked: row.keepOffline(row.result.entityId)
            }
        }
    }
}
