// The status bar's detail, behind a tap: every sync fact in full, and where to act on it.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Fieldsync.Controls

Drawer {
    id: sheet
    objectName: "statusSheet"
    required property QtObject app
    readonly property QtObject vm: app.status
    edge: Qt.BottomEdge
    parent: Overlay.overlay
    width: parent ? parent.width : 360
    height: Math.min(content.implicitHeight + 2 * Theme.pageMargin, parent ? parent.height * 0.8 : 600)
    background: Rectangle {
        color: Theme.window
        border.width: Theme.borderWidth
        border.color: Theme.divider
    }

    ColumnLayout {
        id: content
        width: Math.min(sheet.width - 2 * Theme.pageMargin, Theme.maxContentWidth)
        x: (sheet.width - width) / 2
        y: Theme.pageMargin
        spacing: Theme.spacingS
        FsHeading { text: "Sync"; Layout.fillWidth: true }
        FsLabel {
            objectName: "sheetConnectivity"
            text: sheet.vm.connectivityText
            font.bold: true
            wrapMode: Text.WordWrap
            Layout.fillWidth: true
        }
        FsLabel {
            objectName: "sheetLastSync"
            text: sheet.vm.lastSyncText
            wrapMode: Text.WordWrap
            Layout.fillWidth: true
        }
        FsLabel {
            objectName: "sheetPending"
            text: sheet.vm.pendingText
            wrapMode: Text.WordWrap
            Layout.fillWidth: true
        }
        FsLabel {
            objectName: "sheetProgress"
            visible: sheet.vm.syncing
            text: sheet.vm.progressText
            wrapMode: Text.WordWrap
            Layout.fillWidth: true
        }
        ErrorLabel {
            objectName: "sheetAttention"
            text: sheet.vm.attentionText
            Layout.fillWidth: true
        }
        Flow {
            Layout.fillWidth: true
            spacing: Theme.spacingS
            FsButton {
                objectName: "sheetSyncNowButton"
                text: "Sync now"
                highlighted: true
                enabled: !sheet.vm.syncingNow
                onClicked: sheet.vm.syncNow()
            }
            FsButton {
                visible: sheet.vm.failedCount > 0
                text: "Failed changes"
                onClicked: { sheet.close(); sheet.app.open("dead") }
            }
            FsButton {
                visible: sheet.vm.conflictCount > 0
                text: "Conflicts"
                onClicked: { sheet.close(); sheet.app.open("conflict") }
            }
            FsButton {
                // The export's file dialog lives on Diagnostics (see there): go, then ask.
                objectName: "sheetExportButton"
                text: "Export pending changes…"
                enabled: !sheet.app.pendingExport.busy
                onClicked: {
                    sheet.close()
                    sheet.app.open("diagnostics")
                    sheet.app.pendingExport.chooseFile()
                }
            }
            FsButton {
                text: "Diagnostics"
                onClicked: { sheet.close(); sheet.app.open("diagnostics") }
            }
            FsButton {
                text: "Close"
                onClicked: sheet.close()
            }
        }
    }
}
