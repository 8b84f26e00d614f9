// The core's metrics in words, with a queue-depth chart and the attempts histogram.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

Pane {
    id: page
    objectName: "diagnosticsPage"
    required property QtObject app
    readonly property QtObject vm: app.diagnostics
    padding: 0

    Flickable {
        id: flick
        anchors.fill: parent
        contentWidth: width
        contentHeight: column.implicitHeight + 32
        flickableDirection: Flickable.VerticalFlick
        boundsBehavior: Flickable.StopAtBounds
        clip: true
        ScrollBar.vertical: ScrollBar {}

        ColumnLayout {
            id: column
            x: 16
            y: 16
            width: flick.width - 32
            spacing: 8

            GridLayout {
                objectName: "facts"
                columns: 2
                columnSpacing: 12
                rowSpacing: 6
                Layout.fillWidth: true
                Repeater {
                    model: page.vm.facts
                    delegate: PlainLabel {
                        required property var modelData
                        required property int index
                        text: modelData.label
                        font.bold: true
                        Layout.row: index
                        Layout.column: 0
                        Layout.maximumWidth: column.width * 0.45
                        wrapMode: Text.WordWrap
                    }
                }
                Repeater {
                    model: page.vm.facts
                    delegate: PlainLabel {
                        required property var modelData
                        required property int index
                        text: modelData.text
                        Layout.row: index
                        Layout.column: 1
                        Layout.fillWidth: true
                        wrapMode: Text.WordWrap
                    }
                }
            }

            PlainLabel { text: "Waiting to send, last hour"; font.bold: true; Layout.topMargin: 8 }
            BarChart {
                objectName: "depthChart"
                values: page.vm.depthSeries
                maximum: page.vm.depthMax
                Layout.fillWidth: true
            }
            PlainLabel {
                text: page.vm.depthCaption
                wrapMode: Text.WordWrap
                color: page.palette.placeholderText
                Layout.fillWidth: true
            }

            PlainLabel { text: "Tries needed per change"; font.bold: true; Layout.topMargin: 8 }
            BarChart {
                objectName: "attemptsChart"
                values: page.vm.histogram.map(b => b.count)
                labels: page.vm.histogram.map(b => b.label + ": " + b.count)
                maximum: page.vm.histogramMax
                Layout.fillWidth: true
            }
            PlainLabel {
                text: "Most changes should need one try; many tries mean a poor connection or a struggling server."
                wrapMode: Text.WordWrap
                color: page.palette.placeholderText
                Layout.fillWidth: true
            }
            Button {
                objectName: "refreshButton"
                text: "Refresh"
                implicitHeight: 44
                onClicked: page.vm.refresh()
            }
        }
    }
}
