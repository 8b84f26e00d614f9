// Device settings: sync on metered connections, and where this device keeps its data.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

Pane {
    id: page
    objectName: "settingsPage"
    required property QtObject app
    readonly property QtObject vm: app.settings

    Flickable {
        id: flick
        anchors.fill: parent
        contentWidth: width
        contentHeight: column.implicitHeight + 16
        flickableDirection: Flickable.VerticalFlick
        boundsBehavior: Flickable.StopAtBounds
        clip: true

        ColumnLayout {
            id: column
            width: Math.min(flick.width, 560)
            x: (flick.width - width) / 2
            spacing: 8

            Switch {
                objectName: "meteredSwitch"
                text: "Sync on metered connections"
                checked: page.vm.syncOnMetered
                implicitHeight: 44
                Layout.fillWidth: true
                onToggled: page.vm.setSyncOnMetered(checked)
            }
            PlainLabel {
                text: page.vm.syncOnMetered
                      ? "Edits are sent on mobile data too."
                      : "On mobile data or a metered hotspot, edits wait on this device and are sent on the next unmetered network."
                wrapMode: Text.WordWrap
                color: page.palette.placeholderText
                Layout.fillWidth: true
            }
            PlainLabel { text: "Data folder"; font.bold: true; Layout.topMargin: 8 }
            PlainLabel {
                objectName: "dataDirLabel"
                text: page.vm.dataDir
                wrapMode: Text.Wrap
                Layout.fillWidth: true
            }
        }
    }
}
