// Failed changes: a table of dead jobs (DeadLetterRow) with their filter and bulk actions, and
// below it the selected one (DeadLetterForm). The view-model is ui/viewmodels/deadletters.py.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Fieldsync.Controls

FsPage {
    id: page
    objectName: "deadLetterPage"
    required property QtObject app
    property bool wide: false
    readonly property QtObject vm: app.deadLetters
    maxWidth: wide ? 960 : Theme.maxContentWidth

    function showDetails() {
        const top = page.column.y + details.y - Theme.spacingS
        page.flick.contentY = Math.max(0, Math.min(top, page.flick.contentHeight - page.flick.height))
    }

    PlainLabel {
        text: "Changes the server refused or that could not be delivered. Nothing here is lost: retry, fix and retry, or discard."
        wrapMode: Text.WordWrap
        Layout.fillWidth: true
    }
    Flow {
        Layout.fillWidth: true
        spacing: Theme.spacingS
        FsComboBox {
            objectName: "kindFilter"
            model: page.vm.kindLabels
            // Tied to the filter: the labels are rebuilt on every reload (their
            // counts change), which reset the box to "All" while the list stayed
            // filtered.
            currentIndex: Math.max(0, page.vm.kindValues.indexOf(page.vm.kindFilter))
            width: Math.min(260, page.column.width)
            onActivated: page.vm.kindFilter = page.vm.kindValues[currentIndex]
            Accessible.name: "Filter by kind of error"
        }
        FsButton {
            objectName: "exportButton"
            text: page.vm.checkedCount > 0 ? "Export " + page.vm.checkedCount + " as JSON" : "Export as JSON"
            enabled: page.vm.count > 0
            onClicked: page.vm.exportChecked()
        }
        FsButton {
            objectName: "retryCheckedButton"
            visible: page.vm.checkedCount > 0
            text: "Retry " + page.vm.checkedCount
            onClicked: page.vm.retryChecked()
        }
        FsButton {
            objectName: "discardCheckedButton"
            visible: page.vm.checkedCount > 0
            text: "Discard " + page.vm.checkedCount + "…"
            onClicked: confirmDiscardChecked.visible = true
        }
    }
    FsCard {
        id: confirmDiscardChecked
        objectName: "confirmDiscardChecked"
        visible: false
        Layout.fillWidth: true
        ColumnLayout {
            width: parent.width
            PlainLabel {
                text: "Discard " + page.vm.checkedCount + " checked changes? They will not be sent to the server. Copies are kept in the audit log."
                wrapMode: Text.WordWrap
                Layout.fillWidth: true
            }
            RowLayout {
                Layout.fillWidth: true
                FsButton {
                    objectName: "confirmDiscardCheckedButton"
                    text: "Discard them"
                    Layout.fillWidth: true
                    onClicked: {
                        confirmDiscardChecked.visible = false
                        page.vm.discardChecked()
                    }
                }
                FsButton {
                    text: "Keep them"
                    Layout.fillWidth: true
                    onClicked: confirmDiscardChecked.visible = false
                }
            }
        }
    }

    // Table header (wide only; on a phone each row stacks its cells).
    RowLayout {
        visible: page.wide && page.vm.count > 0
        Layout.fillWidth: true
        spacing: Theme.spacingS
        Item { implicitWidth: Theme.controlHeight }
        PlainLabel { text: "When"; font.bold: true; Layout.preferredWidth: 130 }
        PlainLabel { text: "Work order"; font.bold: true; Layout.preferredWidth: 160 }
        PlainLabel { text: "Change"; font.bold: true; Layout.preferredWidth: 60 }
        PlainLabel { text: "Tries"; font.bold: true; Layout.preferredWidth: 40 }
        PlainLabel { text: "Why it failed"; font.bold: true; Layout.fillWidth: true }
    }
    PlainLabel {
        visible: page.vm.count === 0
        text: "No failed changes. Everything was delivered or is still on its way."
        wrapMode: Text.WordWrap
        color: Theme.textMuted
        Layout.fillWidth: true
    }
    Repeater {
        model: page.vm
        delegate: DeadLetterRow {
            vm: page.vm
            wide: page.wide
            // The details sit below every row: bring them into view, or a tap on row 40 of
            // 50 seems to do nothing.
            onChosen: Qt.callLater(page.showDetails)
        }
    }

    // The selected change.
    DeadLetterForm {
        id: details
        app: page.app
        onBringIntoView: Qt.callLater(page.showDetails)
    }
}
