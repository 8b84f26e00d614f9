// Search, filter and the list of work orders (loaded a page at a time as it scrolls).
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Fieldsync.Controls

Pane {
    id: pane
    required property QtObject app
    readonly property QtObject vm: app.workOrders
    padding: 0
    background: Rectangle { color: Theme.window }

    ColumnLayout {
        anchors.fill: parent
        spacing: 0
        RowLayout {
            Layout.fillWidth: true
            Layout.margins: Theme.spacingS
            spacing: Theme.spacingS
            FsTextField {
                objectName: "searchField"
                placeholderText: "Search title, site, person"
                Layout.fillWidth: true
                Layout.minimumWidth: 120
                inputMethodHints: Qt.ImhNoPredictiveText
                onTextEdited: pane.vm.search = text
                Accessible.name: "Search"
                Accessible.description: placeholderText
            }
            FsComboBox {
                objectName: "statusFilter"
                model: pane.vm.statusFilterLabels
                Layout.preferredWidth: 130
                onActivated: pane.vm.statusFilter = pane.vm.statusFilterValues[currentIndex]
                Accessible.name: "Filter by status"
                Accessible.description: displayText
            }
        }
        ScopeFilterBar {
            objectName: "scopeFilters"
            vm: pane.vm
            Layout.fillWidth: true
            Layout.leftMargin: Theme.spacingS
            Layout.rightMargin: Theme.spacingS
            Layout.bottomMargin: Theme.spacingXs
        }
        FsCaption {
            objectName: "countLabel"
            text: pane.vm.countText
            Layout.leftMargin: Theme.spacingM
            Layout.bottomMargin: Theme.spacingXs
        }
        FsDivider {}
        ListView {
            id: list
            objectName: "workOrderList"
            model: pane.vm
            clip: true
            boundsBehavior: Flickable.StopAtBounds
            flickableDirection: Flickable.VerticalFlick
            Layout.fillWidth: true
            Layout.fillHeight: true
            ScrollBar.vertical: FsScrollBar { what: "work orders" }
            Accessible.role: Accessible.List
            Accessible.name: "Work orders"
            delegate: WorkOrderRow {
                width: ListView.view.width
                onOpened: (entityId) => pane.app.openWorkOrder(entityId)
            }
            ColumnLayout {
                anchors.centerIn: parent
                width: parent.width - 2 * Theme.spacingXl
                visible: list.count === 0 && !pane.vm.loading
                spacing: Theme.spacingM
                FsCaption {
                    objectName: "emptyListText"
                    Layout.fillWidth: true
                    horizontalAlignment: Text.AlignHCenter
                    font.pixelSize: Theme.fontBody
                    text: pane.vm.emptyText
                }
                FsButton {
                    // Not on this device is not "does not exist": ask the server.
                    objectName: "searchServerButton"
                    visible: pane.vm.search !== ""
                    text: "Search all work orders for “" + pane.vm.search + "”"
                    Layout.fillWidth: true
                    onClicked: pane.app.searchServer(pane.vm.search)
                }
            }
        }
    }
}
