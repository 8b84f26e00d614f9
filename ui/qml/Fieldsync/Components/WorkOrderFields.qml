// The work order's fields as the editor shows them, shared by the editor and the
// failed-changes form: the same labels, controls, hints and per-field errors.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Fieldsync.Controls

ColumnLayout {
    id: form
    // Field values by name (strings), errors by name, and which fields are shown: a list of
    // names, or null for all of them (an update fixed on the failed-changes page shows only
    // the fields it sets).
    property var fields: ({})
    property var errors: ({})
    property var shown: null
    // Before every object name: the editor's are "titleField", …; another page's differ.
    property string prefix: ""
    property bool twoColumns: width >= 520
    property var statusValues: []
    property var statusLabels: []
    property var priorityValues: []
    property var priorityLabels: []
    // Each field's label by its name, from the view-model (`ui.wording.FIELD_LABELS`).
    property var fieldLabels: ({})
    signal edited(string name, string value)
    spacing: Theme.spacingS

    function has(name) { return form.shown === null || form.shown.indexOf(name) >= 0 }

    FsField {
        visible: form.has("title")
        label: form.fieldLabels.title || ""
        hint: "required"
        inputName: form.prefix + "titleField"
        errorName: form.prefix + "titleError"
        text: form.fields.title || ""
        error: form.errors.title || ""
        Layout.fillWidth: true
        onEdited: (text) => form.edited("title", text)
    }
    FsField {
        visible: form.has("site")
        label: form.fieldLabels.site || ""
        inputName: form.prefix + "siteField"
        errorName: form.prefix + "siteError"
        text: form.fields.site || ""
        error: form.errors.site || ""
        Layout.fillWidth: true
        onEdited: (text) => form.edited("site", text)
    }

    GridLayout {
        Layout.fillWidth: true
        columns: form.twoColumns ? 2 : 1
        columnSpacing: Theme.spacingM
        rowSpacing: Theme.spacingS
        FsChoiceField {
            visible: form.has("status")
            label: form.fieldLabels.status || ""
            inputName: form.prefix + "statusBox"
            errorName: form.prefix + "statusError"
            choices: form.statusLabels
            currentIndex: form.statusValues.indexOf(form.fields.status)
            error: form.errors.status || ""
            Layout.fillWidth: true
            Layout.preferredWidth: 1
            Layout.alignment: Qt.AlignTop
            onActivated: (index) => form.edited("status", form.statusValues[index])
        }
        FsChoiceField {
            visible: form.has("priority")
            label: form.fieldLabels.priority || ""
            inputName: form.prefix + "priorityBox"
            errorName: form.prefix + "priorityError"
            choices: form.priorityLabels
            currentIndex: form.priorityValues.indexOf(form.fields.priority)
            error: form.errors.priority || ""
            Layout.fillWidth: true
            Layout.preferredWidth: 1
            Layout.alignment: Qt.AlignTop
            onActivated: (index) => form.edited("priority", form.priorityValues[index])
        }
        FsField {
            visible: form.has("assignee")
            label: form.fieldLabels.assignee || ""
            inputName: form.prefix + "assigneeField"
            // A user name: no capital first letter, no word suggestions.
            inputMethodHints: Qt.ImhNoAutoUppercase | Qt.ImhPreferLowercase | Qt.ImhNoPredictiveText
            errorName: form.prefix + "assigneeError"
            text: form.fields.assignee || ""
            error: form.errors.assignee || ""
            Layout.fillWidth: true
            Layout.preferredWidth: 1
            Layout.alignment: Qt.AlignTop
            onEdited: (text) => form.edited("assignee", text)
        }
        FsField {
            // Beside the assignee: the team a work order belongs to (issue 16).
            visible: form.has("team") && form.fields.team !== undefined
            label: form.fieldLabels.team || ""
            inputName: form.prefix + "teamField"
            inputMethodHints: Qt.ImhNoAutoUppercase | Qt.ImhPreferLowercase | Qt.ImhNoPredictiveText
            errorName: form.prefix + "teamError"
            text: form.fields.team || ""
            error: form.errors.team || ""
            Layout.fillWidth: true
            Layout.preferredWidth: 1
            Layout.alignment: Qt.AlignTop
            onEdited: (text) => form.edited("team", text)
        }
        FsDateField {
            // Picked from a calendar: a touch keyboard has no good way to type a date.
            visible: form.has("due_date")
            label: form.fieldLabels.due_date || ""
            inputName: form.prefix + "dueDateField"
            errorName: form.prefix + "dueDateError"
            text: form.fields.due_date || ""
            error: form.errors.due_date || ""
            Layout.fillWidth: true
            Layout.preferredWidth: 1
            Layout.alignment: Qt.AlignTop
            onEdited: (text) => form.edited("due_date", text)
        }
    }

    FsAreaField {
        visible: form.has("notes")
        label: form.fieldLabels.notes || ""
        inputName: form.prefix + "notesField"
        errorName: form.prefix + "notesError"
        text: form.fields.notes || ""
        error: form.errors.notes || ""
        Layout.fillWidth: true
        onEdited: (text) => form.edited("notes", text)
    }
    ErrorLabel {
        objectName: form.prefix + "recordError"
        text: form.errors.record || ""
        Layout.fillWidth: true
    }
}
