// Always visible, in two lines: connection, last sync and "Sync now"; then what needs a person,
// what is being sent, or what waits. Tap it for the detail sheet.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Fieldsync.Controls

ToolBar {
    id: bar
    objectName: "statusBar"
    required property QtObject app
    readonly property QtObject vm: app.status
    position: ToolBar.Footer
    topPadding: Theme.spacingXs
    bottomPadding: Theme.spacingXs
    leftPadding: Theme.spacingM
    rightPadding: Theme.spacingXs

    background: Rectangle {
        color: Theme.surfaceRaised
        FsDivider { anchors.top: parent.top; width: parent.width }
        // The flush's progress as a thin bar along the top edge: it takes no line of text.
        ProgressBar {
            objectName: "syncProgressBar"
            visible: bar.vm.syncing
            indeterminate: !bar.vm.progressDeterminate
            value: bar.vm.progressFraction
            anchors.top: parent.top
            width: parent.width
            height: 4
            Accessible.name: bar.vm.progressText
        }
    }

    function openSheet() { sheet.open() }

    // Line 1: the state icon, connection and last sync, "Sync now". Line 2, under all of it
    // (the full width, so it is not cut short on a phone): what needs a person first, then
    // what is moving, then what waits.
    ColumnLayout {
        id: words
        objectName: "statusWords"
        anchors.fill: parent
        spacing: 0
        Accessible.role: Accessible.Button
        Accessible.name: "Sync details"
        Accessible.description: bar.vm.connectivityText + ". " + bar.vm.lastSyncText
        Accessible.onPressAction: bar.openSheet()
        TapHandler { onTapped: bar.openSheet() }
        RowLayout {
            Layout.fillWidth: true
            spacing: Theme.spacingS
            SyncIcon {
                kind: Theme.connectivityKind(bar.vm.connectivity)
                Layout.alignment: Qt.AlignVCenter
            }
            FsLabel {
                objectName: "connectivityLabel"
                text: bar.vm.connectivityText
                font.bold: true
            }
            FsLabel {
                id: lastSync
                objectName: "lastSyncLabel"
                text: bar.vm.lastSyncText
                color: Theme.textMuted
                font.pixelSize: Theme.fontCaption
                elide: Text.ElideRight
                // Cut short ("La…") it says nothing: then only the detail sheet shows it.
                opacity: truncated ? 0 : 1
                Layout.fillWidth: true
            }
            FsButton {
                objectName: "syncNowButton"
                text: "Sync now"
                enabled: !bar.vm.syncingNow
                onClicked: bar.vm.syncNow()
            }
        }
        ErrorLabel {
            // Failed changes and conflicts wait for a person: never "nothing waiting".
            objectName: "attentionLabel"
            text: bar.vm.attentionText
            font.bold: true
            wrapMode: Text.NoWrap
            elide: Text.ElideRight
            Layout.fillWidth: true
            TapHandler {
                onTapped: bar.app.open(bar.vm.failedCount > 0 ? "dead" : "conflict")
            }
        }
        FsLabel {
            objectName: "progressLabel"
            visible: bar.vm.attentionText === "" && bar.vm.syncing
            text: bar.vm.progressText
            font.pixelSize: Theme.fontCaption
            elide: Text.ElideRight
            Layout.fillWidth: true
        }
        FsLabel {
            objectName: "pendingLabel"
            visible: bar.vm.attentionText === "" && !bar.vm.syncing
            // On a phone a long connection word ("Server unreachable") leaves no room for the
            // last sync on line 1: then it leads line 2 instead of vanishing.
            text: (lastSync.truncated ? bar.vm.lastSyncText + " · " : "") + bar.vm.pendingText
            font.pixelSize: Theme.fontCaption
            elide: Text.ElideRight
            Layout.fillWidth: true
        }
    }

    StatusSheet {
        id: sheet
        app: bar.app
    }
}
