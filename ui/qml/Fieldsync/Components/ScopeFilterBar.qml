// The list's scope filters: every work order on this device, mine, my team's, the pinned ones.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Fieldsync.Controls

RowLayout {
    id: bar
    required property QtObject vm
    spacing: Theme.spacingXs
    Accessible.role: Accessible.Grouping
    Accessible.name: "Show"
    ButtonGroup { id: group }
    Repeater {
        model: bar.vm.scopeFilters
        FsFilterButton {
            required property var modelData
            objectName: "scopeFilter_" + modelData.value
            text: modelData.label
            checked: bar.vm.scopeFilter === modelData.value
            ButtonGroup.group: group
            Layout.fillWidth: true
            Layout.preferredWidth: 1
            onClicked: bar.vm.scopeFilter = modelData.value
        }
    }
}
