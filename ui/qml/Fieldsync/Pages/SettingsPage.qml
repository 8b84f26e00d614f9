// Device settings: sync on metered connections, notifications, and where this device keeps
// its data.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Fieldsync.Controls

FsPage {
    id: page
    objectName: "settingsPage"
    required property QtObject app
    readonly property QtObject vm: app.settings
    maxWidth: 560

    FsSwitch {
        objectName: "meteredSwitch"
        text: "Sync on metered connections"
        checked: page.vm.syncOnMetered
        Layout.fillWidth: true
        onToggled: page.vm.setSyncOnMetered(checked)
    }
    FsCaption {
        text: page.vm.syncOnMetered
              ? "Edits are sent on mobile data too."
              : "On mobile data or a metered hotspot, edits wait on this device and are sent on the next unmetered network."
        Layout.fillWidth: true
    }
    FsSwitch {
        objectName: "notificationsSwitch"
        text: "Notifications"
        checked: page.vm.notifications
        Layout.fillWidth: true
        Layout.topMargin: Theme.spacingS
        onToggled: page.vm.setNotifications(checked)
    }
    FsCaption {
        text: page.vm.notifications
              ? "The desktop tells you of a conflict, a change or a file that failed, and a sign-out, even with the app closed."
              : "Nothing is shown outside the app: what needs you waits in the status bar."
        Layout.fillWidth: true
    }
    FsButton {
        objectName: "removeSamplesButton"
        visible: page.vm.sampleCount > 0
        text: "Remove the " + page.vm.sampleCount + " sample work orders"
        Layout.fillWidth: true
        Layout.topMargin: Theme.spacingS
        onClicked: page.vm.removeSamples()
    }
    FsHeading { text: "Data folder"; Layout.topMargin: Theme.spacingS; Layout.fillWidth: true }
    FsLabel {
        objectName: "dataDirLabel"
        text: page.vm.dataDir
        wrapMode: Text.Wrap
        Layout.fillWidth: true
    }
}
