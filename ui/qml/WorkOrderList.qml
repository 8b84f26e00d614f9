// Search, filter and the list of work orders (loaded a page at a time as it scrolls).
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

Pane {
    id: pane
    required property QtObject app
    readonly property QtObject vm: app.workOrders
    padding: 0

    ColumnLayout {
        anchors.fill: parent
        spacing: 0
        RowLayout {
            Layout.fillWidth: true
            Layout.margins: 8
            spacing: 8
            TextField {
                objectName: "searchField"
                placeholderText: "Search title, site, person"
                implicitHeight: 44
                Layout.fillWidth: true
                Layout.minimumWidth: 120
                inputMethodHints: Qt.ImhNoPredictiveText
                onTextEdited: pane.vm.search = text
            }
            ComboBox {
                objectName: "statusFilter"
                model: pane.vm.statusFilterLabels
                implicitHeight: 44
                Layout.preferredWidth: 130
                onActivated: pane.vm.statusFilter = pane.vm.statusFilterValues[currentIndex]
                Accessible.name: "Filter by status"
            }
        }
        PlainLabel {
            objectName: "countLabel"
            text: pane.vm.total === 1 ? "1 work order" : pane.vm.total + " work orders"
            color: pane.palette.placeholderText
            Layout.leftMargin: 12
            Layout.bottomMargin: 4
        }
        ListView {
            id: list
            objectName: "workOrderList"
            model: pane.vm
            clip: true
            boundsBehavior: Flickable.StopAtBounds
            flickableDirection: Flickable.VerticalFlick
            Layout.fillWidth: true
            Layout.fillHeight: true
            ScrollBar.vertical: ScrollBar {}
            delegate: WorkOrderRow {
                width: ListView.view.width
                onOpened: (entityId) => pane.app.openWorkOrder(entityId)
            }
            PlainLabel {
                anchors.centerIn: parent
                width: parent.width - 32
                visible: list.count === 0 && !pane.vm.loading
                horizontalAlignment: Text.AlignHCenter
                wrapMode: Text.WordWrap
                text: pane.vm.search || pane.vm.statusFilter
                      ? "No work order matches."
                      : "No work orders on this device yet. Press “+ New” to add one."
                color: pane.palette.placeholderText
            }
        }
    }
}
