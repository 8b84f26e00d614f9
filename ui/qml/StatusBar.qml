// Always visible: connection, what waits to be sent, last sync, progress and "Sync now".
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

ToolBar {
    id: bar
    objectName: "statusBar"
    required property QtObject app
    readonly property QtObject vm: app.status
    position: ToolBar.Footer

    readonly property color stateColor: {
        switch (vm.connectivity) {
        case "online": return "#2e7d32"
        case "offline": return "#757575"
        case "paused": return "#757575"
        case "degraded": return "#b45309"
        case "unreachable": return "#b45309"
        case "signed_out": return "#c62828"
        default: return "#1565c0"
        }
    }

    ColumnLayout {
        anchors.fill: parent
        anchors.leftMargin: 8
        anchors.rightMargin: 4
        spacing: 2
        RowLayout {
            Layout.fillWidth: true
            spacing: 8
            Rectangle {
                width: 12
                height: 12
                radius: 6
                color: bar.stateColor
            }
            ColumnLayout {
                Layout.fillWidth: true
                spacing: 0
                PlainLabel {
                    objectName: "connectivityLabel"
                    text: bar.vm.connectivityText
                    font.bold: true
                    elide: Text.ElideRight
                    Layout.fillWidth: true
                }
                PlainLabel {
                    objectName: "pendingLabel"
                    text: bar.vm.pendingText + " · " + bar.vm.lastSyncText
                    wrapMode: Text.WordWrap
                    maximumLineCount: 2
                    elide: Text.ElideRight
                    Layout.fillWidth: true
                }
                ErrorLabel {
                    // Failed changes and conflicts wait for a person: never "nothing waiting".
                    objectName: "attentionLabel"
                    text: bar.vm.attentionText
                    font.bold: true
                    Layout.fillWidth: true
                    TapHandler {
                        onTapped: bar.app.open(bar.vm.failedCount > 0 ? "dead" : "conflict")
                    }
                }
            }
            Button {
                objectName: "syncNowButton"
                text: "Sync now"
                enabled: !bar.vm.syncingNow
                implicitHeight: 44
                onClicked: bar.vm.syncNow()
            }
        }
        RowLayout {
            visible: bar.vm.syncing
            Layout.fillWidth: true
            ProgressBar {
                objectName: "syncProgressBar"
                indeterminate: !bar.vm.progressDeterminate
                value: bar.vm.progressFraction
                Layout.fillWidth: true
            }
            PlainLabel {
                objectName: "progressLabel"
                text: bar.vm.progressText
            }
        }
    }
}
