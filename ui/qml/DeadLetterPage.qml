// Failed changes: a table of dead jobs, the selected one's history and payload, and actions.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

FsPage {
    id: page
    objectName: "deadLetterPage"
    required property QtObject app
    property bool wide: false
    readonly property QtObject vm: app.deadLetters
    readonly property var job: vm.selected
    readonly property bool hasJob: job.jobId !== undefined
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
        delegate: ItemDelegate {
            id: row
            required property int index
            required property int jobId
            required property string when
            required property string title
            required property string op
            required property int attempts
            required property string errorText
            objectName: "deadRow_" + index
            Layout.fillWidth: true
            highlighted: page.vm.selectedJobId === jobId
        background: Rectangle {
            radius: Theme.radius
            color: row.down ? Theme.divider : row.highlighted ? Theme.surface : Theme.surfaceRaised
            border.width: row.highlighted ? 2 : Theme.borderWidth
            border.color: row.highlighted ? Theme.accent : Theme.divider
        }
            implicitHeight: Math.max(Theme.rowHeight, cells.implicitHeight + 12)
        Accessible.role: Accessible.ListItem
        Accessible.name: row.title + ", " + row.errorText
            onClicked: {
                page.vm.select(jobId)
                // The details sit below every row: bring them into view, or a tap on
                // row 40 of 50 seems to do nothing.
                Qt.callLater(page.showDetails)
            }
            contentItem: RowLayout {
                id: cells
                spacing: Theme.spacingS
                FsCheckBox {
                    objectName: "deadCheck_" + row.index
                    checked: page.vm.get(row.index).checked === true
                    implicitWidth: Theme.controlHeight
                    onToggled: page.vm.setChecked(row.jobId, checked)
                    Accessible.name: "Select " + row.title
                }
                GridLayout {
                    columns: page.wide ? 5 : 1
                    columnSpacing: 8
                    rowSpacing: 2
                    Layout.fillWidth: true
                    PlainLabel {
                        text: page.wide ? row.when : row.title
                        font.bold: !page.wide
                        elide: Text.ElideRight
                        Layout.preferredWidth: page.wide ? 130 : -1
                        Layout.fillWidth: !page.wide
                    }
                    PlainLabel {
                        text: page.wide ? row.title : row.op + " · " + row.when + " · " + row.attempts + (row.attempts === 1 ? " try" : " tries")
                        elide: Text.ElideRight
                        Layout.preferredWidth: page.wide ? 160 : -1
                        Layout.fillWidth: !page.wide
                    }
                    PlainLabel { visible: page.wide; text: row.op; Layout.preferredWidth: 60 }
                    PlainLabel { visible: page.wide; text: row.attempts; Layout.preferredWidth: 40 }
                    PlainLabel {
                        text: row.errorText
                        wrapMode: Text.WordWrap
                        maximumLineCount: 3
                        elide: Text.ElideRight
                        Layout.fillWidth: true
                    }
                }
            }
        }
    }

    // The selected change.
    ColumnLayout {
        id: details
        visible: page.hasJob
        Layout.fillWidth: true
        Layout.topMargin: 8
        spacing: 6
        FsDivider {}
        // Another row was chosen while this form had edits: ask before they are lost.
        FsCard {
            objectName: "confirmLeaveForm"
            visible: page.vm.askingToDiscardEdits
            Layout.fillWidth: true
            ColumnLayout {
                width: parent.width
                PlainLabel {
                    text: "Discard your changes to this failed change?"
                    wrapMode: Text.WordWrap
                    Layout.fillWidth: true
                }
                RowLayout {
                    Layout.fillWidth: true
                    FsButton {
                        objectName: "keepEditingButton"
                        text: "Keep editing"
                        Layout.fillWidth: true
                        onClicked: page.vm.keepEditing()
                    }
                    FsButton {
                        objectName: "discardEditsButton"
                        text: "Discard"
                        Layout.fillWidth: true
                        onClicked: {
                            page.vm.discardEdits()
                            Qt.callLater(page.showDetails)
                        }
                    }
                }
            }
        }
        PlainLabel {
            objectName: "selectedTitle"
            text: page.hasJob ? page.job.op + " of “" + page.job.title + "”" : ""
            font.bold: true
            font.pixelSize: Theme.fontSubtitle
            wrapMode: Text.WordWrap
            Layout.fillWidth: true
        }
        PlainLabel {
            text: page.hasJob ? "Queued " + page.job.queuedAt + ", failed " + page.job.when + " after " + page.job.attempts + (page.job.attempts === 1 ? " try. " : " tries. ") + page.job.kindText + "." : ""
            wrapMode: Text.WordWrap
            Layout.fillWidth: true
        }
        PlainLabel {
            objectName: "selectedError"
            text: page.vm.reasonAbove
            wrapMode: Text.Wrap
            Layout.fillWidth: true
        }
        FsHeading {
            visible: page.vm.formNames.length > 0
            text: "Fix and retry"
            Layout.fillWidth: true
        }
        WorkOrderFields {
            objectName: "failedForm"
            visible: page.vm.formNames.length > 0
            prefix: "failed_"
            shown: page.vm.formNames
            fields: page.vm.formFields
            errors: page.vm.formErrors
            statusValues: page.app.editor.statusValues
            statusLabels: page.app.editor.statusLabels
            priorityValues: page.app.editor.priorityValues
            priorityLabels: page.app.editor.priorityLabels
            Layout.fillWidth: true
            onEdited: (name, value) => page.vm.setFormField(name, value)
        }
        Flow {
            Layout.fillWidth: true
            spacing: Theme.spacingS
            FsButton {
                objectName: "retryButton"
                text: page.vm.formEdited ? "Retry with my edits" : "Retry"
                onClicked: page.vm.retryForm(page.job.jobId)
            }
            FsButton {
                objectName: "discardButton"
                text: "Discard…"
                onClicked: confirmDiscard.visible = true
            }
            FsButton {
                id: detailsButton
                objectName: "detailsButton"
                text: "Details"
                checkable: true
            }
        }
        ColumnLayout {
            objectName: "details"
            visible: detailsButton.checked
            Layout.fillWidth: true
            spacing: 6
            FsHeading { text: "Attempts"; Layout.fillWidth: true }
            Repeater {
                model: page.vm.history
                PlainLabel {
                    required property var modelData
                    text: modelData
                    wrapMode: Text.Wrap
                    Layout.fillWidth: true
                }
            }
            PlainLabel {
                objectName: "fullReason"
                text: page.hasJob ? page.job.errorText : ""
                wrapMode: Text.Wrap
                Layout.fillWidth: true
            }
            FsHeading { text: "The change as JSON"; Layout.fillWidth: true }
            FsTextArea {
                id: payloadEditor
                Accessible.name: "The change as JSON"
                objectName: "payloadEditor"
                text: page.hasJob ? page.job.payloadJson : ""
                font.family: "monospace"
                wrapMode: TextEdit.WrapAnywhere
                Layout.fillWidth: true
                Layout.preferredHeight: Math.max(100, implicitHeight)
            }
            ErrorLabel { objectName: "editError"; text: page.vm.editError; Layout.fillWidth: true }
            FsButton {
                objectName: "retryEditedButton"
                text: "Retry with the edited JSON"
                enabled: payloadEditor.text !== page.job.payloadJson
                onClicked: page.vm.retryEdited(page.job.jobId, payloadEditor.text)
            }
        }
        FsCard {
            id: confirmDiscard
            objectName: "confirmDiscard"
            visible: false
            Layout.fillWidth: true
            ColumnLayout {
                width: parent.width
                PlainLabel {
                    text: "Discard this change? It will not be sent to the server. A copy is kept in the audit log."
                    wrapMode: Text.WordWrap
                    Layout.fillWidth: true
                }
                RowLayout {
                    Layout.fillWidth: true
                    FsButton {
                        objectName: "confirmDiscardButton"
                        text: "Discard"
                        Layout.fillWidth: true
                        onClicked: {
                            confirmDiscard.visible = false
                            page.vm.discard(page.job.jobId)
                        }
                    }
                    FsButton {
                        objectName: "cancelDiscardButton"
                        text: "Keep it"
                        Layout.fillWidth: true
                        onClicked: confirmDiscard.visible = false
                    }
                }
            }
        }
    }
}
