// Create or edit a work order; unsynced edits are marked; Save validates with the server's rules.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

FsPage {
    id: page
    objectName: "editorPage"
    required property QtObject app
    readonly property QtObject vm: app.editor
    readonly property bool twoColumns: column.width >= 520
    // Nothing of another work order is shown or editable while this one is read.
    column.enabled: page.vm.isNew || page.vm.loaded

    FsLabel {
        objectName: "loadingLabel"
        visible: !page.vm.isNew && !page.vm.loaded
        text: "Opening the work order…"
        Layout.fillWidth: true
    }

    FsCard {
        objectName: "unsyncedBanner"
        visible: page.vm.unsynced || page.vm.isNew
        tone: page.vm.badge === "failed" || page.vm.badge === "conflict" ? "error" : ""
        Layout.fillWidth: true
        RowLayout {
            anchors.left: parent.left
            anchors.right: parent.right
            spacing: Theme.spacingS
            SyncBadge {
                visible: !page.vm.isNew
                kind: page.vm.badge
                text: page.vm.badgeText
                Layout.alignment: Qt.AlignTop
            }
            FsLabel {
                objectName: "syncText"
                text: page.vm.syncText
                wrapMode: Text.WordWrap
                Layout.fillWidth: true
            }
        }
    }
    FsButton {
        objectName: "resolveConflictButton"
        visible: page.vm.badge === "conflict"
        text: "Resolve the conflict…"
        highlighted: true
        onClicked: page.app.resolveConflictFor(page.vm.entityId)
    }

    FsField {
        label: "Title"
        hint: "required"
        inputName: "titleField"
        errorName: "titleError"
        text: page.vm.fields.title
        error: page.vm.errors.title || ""
        Layout.fillWidth: true
        onEdited: (text) => page.vm.setField("title", text)
    }
    FsField {
        label: "Site"
        inputName: "siteField"
        text: page.vm.fields.site
        error: page.vm.errors.site || ""
        Layout.fillWidth: true
        onEdited: (text) => page.vm.setField("site", text)
    }

    GridLayout {
        Layout.fillWidth: true
        columns: page.twoColumns ? 2 : 1
        columnSpacing: Theme.spacingM
        rowSpacing: Theme.spacingS
        FsChoiceField {
            label: "Status"
            inputName: "statusBox"
            choices: page.vm.statusLabels
            currentIndex: page.vm.statusValues.indexOf(page.vm.fields.status)
            Layout.fillWidth: true
            Layout.preferredWidth: 1
            Layout.alignment: Qt.AlignTop
            onActivated: (index) => page.vm.setField("status", page.vm.statusValues[index])
        }
        FsChoiceField {
            label: "Priority"
            inputName: "priorityBox"
            choices: page.vm.priorityLabels
            currentIndex: page.vm.priorityValues.indexOf(page.vm.fields.priority)
            Layout.fillWidth: true
            Layout.preferredWidth: 1
            Layout.alignment: Qt.AlignTop
            onActivated: (index) => page.vm.setField("priority", page.vm.priorityValues[index])
        }
        FsField {
            label: "Assignee"
            inputName: "assigneeField"
            text: page.vm.fields.assignee
            error: page.vm.errors.assignee || ""
            Layout.fillWidth: true
            Layout.preferredWidth: 1
            Layout.alignment: Qt.AlignTop
            onEdited: (text) => page.vm.setField("assignee", text)
        }
        FsField {
            label: "Due date"
            hint: "YYYY-MM-DD"
            inputName: "dueDateField"
            errorName: "dueDateError"
            text: page.vm.fields.due_date
            placeholderText: "YYYY-MM-DD"
            inputMethodHints: Qt.ImhDate
            error: page.vm.errors.due_date || ""
            Layout.fillWidth: true
            Layout.preferredWidth: 1
            Layout.alignment: Qt.AlignTop
            onEdited: (text) => page.vm.setField("due_date", text)
        }
    }

    FsAreaField {
        label: "Notes"
        inputName: "notesField"
        text: page.vm.fields.notes
        error: page.vm.errors.notes || ""
        Layout.fillWidth: true
        onEdited: (text) => page.vm.setField("notes", text)
    }
    ErrorLabel { objectName: "recordError"; text: page.vm.errors.record || ""; Layout.fillWidth: true }

    RowLayout {
        Layout.fillWidth: true
        Layout.topMargin: Theme.spacingS
        spacing: Theme.spacingS
        FsButton {
            objectName: "saveButton"
            text: page.vm.saving ? "Saving…" : "Save"
            highlighted: true
            enabled: page.vm.canSave
            Layout.fillWidth: true
            Layout.preferredWidth: 1
            onClicked: page.vm.save()
        }
        FsButton {
            objectName: "revertButton"
            text: "Undo changes"
            enabled: page.vm.dirty
            Layout.fillWidth: true
            Layout.preferredWidth: 1
            onClicked: page.vm.revert()
        }
    }
}
