// The core's metrics in words, with a queue-depth chart and the attempts histogram.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

FsPage {
    id: page
    objectName: "diagnosticsPage"
    required property QtObject app
    readonly property QtObject vm: app.diagnostics

    GridLayout {
        id: factsGrid
        objectName: "facts"
        columns: 2
        columnSpacing: Theme.spacingM
        rowSpacing: Theme.spacingXs
        Layout.fillWidth: true
        Repeater {
            model: page.vm.facts
            delegate: FsLabel {
                required property var modelData
                required property int index
                text: modelData.label
                font.bold: true
                Layout.row: index
                Layout.column: 0
                Layout.maximumWidth: page.column.width * 0.45
                wrapMode: Text.WordWrap
            }
        }
        Repeater {
            model: page.vm.facts
            delegate: FsLabel {
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

    FsHeading { text: "Waiting to send, last hour"; Layout.topMargin: Theme.spacingM; Layout.fillWidth: true }
    BarChart {
        objectName: "depthChart"
        values: page.vm.depthSeries
        maximum: page.vm.depthMax
        Layout.fillWidth: true
    }
    FsCaption {
        text: page.vm.depthCaption
        Layout.fillWidth: true
    }

    FsHeading { text: "Tries needed per change"; Layout.topMargin: Theme.spacingM; Layout.fillWidth: true }
    BarChart {
        objectName: "attemptsChart"
        values: page.vm.histogram.map(b => b.count)
        labels: page.vm.histogram.map(b => b.label + ": " + b.count)
        maximum: page.vm.histogramMax
        Layout.fillWidth: true
    }
    FsCaption {
        text: "Most changes should need one try; many tries mean a poor connection or a struggling server."
        Layout.fillWidth: true
    }
    FsButton {
        objectName: "refreshButton"
        text: "Refresh"
        onClicked: page.vm.refresh()
    }
}
