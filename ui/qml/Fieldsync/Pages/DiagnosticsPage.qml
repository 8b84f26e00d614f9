// The core's metrics in words, with a queue-depth chart and the attempts histogram.
import QtQuick
import QtQuick.Controls
import QtQuick.Dialogs
import QtQuick.Layouts
import Fieldsync.Controls
import Fieldsync.Components

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
    ExportPendingButton {
        objectName: "exportPendingButton"
        app: page.app
    }
    FsLabel {
        objectName: "exportResult"
        text: page.app.pendingExport.lastResult
        visible: text !== ""
        wrapMode: Text.WrapAnywhere
        Layout.fillWidth: true
    }

    // WORKAROUND: the dialog lives on this page: declared in the window or in the status
    // sheet, the Qt Quick file dialog (a window of its own; seen offscreen) ignored its
    // Save button. The sheet's button brings the person here first.
    FileDialog {
        id: exportDialog
        objectName: "exportDialog"
        title: "Export pending changes"
        fileMode: FileDialog.SaveFile
        nameFilters: ["JSON files (*.json)"]
        currentFolder: page.app.pendingExport.folderUrl
        selectedFile: page.app.pendingExport.folderUrl + "/" + page.app.pendingExport.suggestedName
        onAccepted: page.app.pendingExport.exportTo(selectedFile.toString())
    }
    Connections {
        target: page.app.pendingExport
        function onFileWanted() { exportDialog.open() }
    }
}
