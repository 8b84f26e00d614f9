// The editor's "Keep offline" control: whether this device holds the work order, and a switch
// that pins it (it then stays here even when it is not assigned to the person or their team).
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Fieldsync.Controls

FsCard {
    id: card
    required property QtObject vm
    visible: vm.available

    ColumnLayout {
        anchors.left: parent.left
        anchors.right: parent.right
        spacing: Theme.spacingXs
        FsMark {
            objectName: "editorOfflineMark"
            kind: card.vm.pinned ? "pinned" : "offline"
            iconName: card.vm.pinned ? "pin" : "offline"
            label: card.vm.offlineText
            Layout.fillWidth: true
        }
        FsSwitch {
            id: pinSwitch
            objectName: "keepOfflineSwitch"
            text: "Keep offline"
            checked: card.vm.pinned
            enabled: !card.vm.busy
            Layout.fillWidth: true
            Accessible.description: card.vm.pinHint
            onToggled: {
                card.vm.setPinned(checked)
                checked = Qt.binding(() => card.vm.pinned)
            }
        }
        FsCaption {
            objectName: "keepOfflineHint"
            text: card.vm.pinHint
            Layout.fillWidth: true
        }
    }
}
