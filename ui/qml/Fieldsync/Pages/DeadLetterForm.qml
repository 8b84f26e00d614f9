// The failed change selected in DeadLetterPage: why it failed, the form to fix and retry it
// (ui/viewmodels/deadform.py), its attempts and JSON, and discard.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Fieldsync.Controls
import Fieldsync.Components

ColumnLayout {
    id: form
    required property QtObject app
    readonly property QtObject vm: app.deadLetters
    readonly property var job: vm.selected
    readonly property bool hasJob: job.jobId !== undefined
    // The form now shows another change: the page scrolls it into view.
    signal bringIntoView()

    visible: form.hasJob
    Layout.fillWidth: true
    Layout.topMargin: 8
    spacing: 6
    FsDivider {}
    // Another row was chosen while this form had edits: ask before they are lost.
    FsCard {
        objectName: "confirmLeaveForm"
        visible: form.vm.askingToDiscardEdits
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
                    onClicked: form.vm.keepEditing()
                }
                FsButton {
                    objectName: "discardEditsButton"
                    text: "Discard"
                    Layout.fillWidth: true
                    onClicked: {
                        form.vm.discardEdits()
                        form.bringIntoView()
                    }
                }
            }
        }
    }
    PlainLabel {
        objectName: "selectedTitle"
        text: form.hasJob ? form.job.op + " of “" + form.job.title + "”" : ""
        font.bold: true
        font.pixelSize: Theme.fontSubtitle
        wrapMode: Text.WordWrap
        Layout.fillWidth: true
    }
    PlainLabel {
        text: form.hasJob ? "Queued " + form.job.queuedAt + ", failed " + form.job.when + " after " + form.job.attempts + (form.job.attempts === 1 ? " try. " : " tries. ") + form.job.kindText + "." : ""
        wrapMode: Text.WordWrap
        Layout.fillWidth: true
    }
    PlainLabel {
        objectName: "selectedError"
        text: form.vm.reasonAbove
        wrapMode: Text.Wrap
        Layout.fillWidth: true
    }
    FsHeading {
        visible: form.vm.formNames.length > 0
        text: "Fix and retry"
        Layout.fillWidth: true
    }
    WorkOrderFields {
        objectName: "failedForm"
        visible: form.vm.formNames.length > 0
        prefix: "failed_"
        shown: form.vm.formNames
        fields: form.vm.formFields
        errors: form.vm.formErrors
        statusValues: form.app.editor.statusValues
        statusLabels: form.app.editor.statusLabels
        priorityValues: form.app.editor.priorityValues
        priorityLabels: form.app.editor.priorityLabels
        fieldLabels: form.app.editor.fieldLabels
        Layout.fillWidth: true
        onEdited: (name, value) => form.vm.setFormField(name, value)
    }
    Flow {
        Layout.fillWidth: true
        spacing: Theme.spacingS
        FsButton {
            objectName: "retryButton"
            text: form.vm.formEdited ? "Retry with my edits" : "Retry"
            onClicked: form.vm.retryForm(form.job.jobId)
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
            model: form.vm.history
            PlainLabel {
                required property var modelData
                text: modelData
                wrapMode: Text.Wrap
                Layout.fillWidth: true
            }
        }
        PlainLabel {
            objectName: "fullReason"
            text: form.hasJob ? form.job.errorText : ""
            wrapMode: Text.Wrap
            Layout.fillWidth: true
        }
        FsHeading { text: "The change as JSON"; Layout.fillWidth: true }
        FsTextArea {
            id: payloadEditor
            Accessible.name: "The change as JSON"
            objectName: "payloadEditor"
            text: form.hasJob ? form.job.payloadJson : ""
            font.family: "monospace"
            wrapMode: TextEdit.WrapAnywhere
            Layout.fillWidth: true
            Layout.preferredHeight: Math.max(100, implicitHeight)
        }
        ErrorLabel { objectName: "editError"; text: form.vm.editError; Layout.fillWidth: true }
        FsButton {
            objectName: "retryEditedButton"
            text: "Retry with the edited JSON"
            enabled: payloadEditor.text !== form.job.payloadJson
            onClicked: form.vm.retryEdited(form.job.jobId, payloadEditor.text)
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
                objectName: "discardQuestion"
                text: form.hasJob ? form.job.discardQuestion : ""
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
                        form.vm.discard(form.job.jobId)
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
