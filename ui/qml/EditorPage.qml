// Create or edit a work order; unsynced edits are marked; Save validates with the server's rules.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

Pane {
    id: page
    objectName: "editorPage"
    required property QtObject app
    readonly property QtObject vm: app.editor
    padding: 0

    Flickable {
        id: flick
        anchors.fill: parent
        contentWidth: width
        contentHeight: form.implicitHeight + 32
        flickableDirection: Flickable.VerticalFlick
        boundsBehavior: Flickable.StopAtBounds
        clip: true
        ScrollBar.vertical: ScrollBar {}

        ColumnLayout {
            id: form
            x: 16
            y: 16
            width: flick.width - 32
            spacing: 6
            // Nothing of another work order is shown or editable while this one is read.
            enabled: page.vm.isNew || page.vm.loaded

            PlainLabel {
                objectName: "loadingLabel"
                visible: !page.vm.isNew && !page.vm.loaded
                text: "Opening the work order…"
                Layout.fillWidth: true
            }

            Rectangle {
                objectName: "unsyncedBanner"
                visible: page.vm.unsynced || page.vm.isNew
                Layout.fillWidth: true
                implicitHeight: bannerRow.implicitHeight + 16
                radius: 6
                color: "transparent"
                border.color: page.palette.mid
                RowLayout {
                    id: bannerRow
                    anchors.fill: parent
                    anchors.margins: 8
                    spacing: 8
                    SyncBadge {
                        visible: !page.vm.isNew
                        kind: page.vm.badge
                        text: page.vm.badgeText
                    }
                    PlainLabel {
                        objectName: "syncText"
                        text: page.vm.syncText
                        wrapMode: Text.WordWrap
                        Layout.fillWidth: true
                    }
                }
            }
            Button {
                objectName: "resolveConflictButton"
                visible: page.vm.badge === "conflict"
                text: "Resolve the conflict…"
                implicitHeight: 44
                onClicked: page.app.resolveConflictFor(page.vm.entityId)
            }

            PlainLabel { text: "Title (required)"; font.bold: true }
            TextField {
                objectName: "titleField"
                text: page.vm.fields.title
                implicitHeight: 44
                Layout.fillWidth: true
                onTextEdited: page.vm.setField("title", text)
            }
            ErrorLabel { objectName: "titleError"; text: page.vm.errors.title || ""; Layout.fillWidth: true }

            PlainLabel { text: "Site"; font.bold: true }
            TextField {
                objectName: "siteField"
                text: page.vm.fields.site
                implicitHeight: 44
                Layout.fillWidth: true
                onTextEdited: page.vm.setField("site", text)
            }
            ErrorLabel { text: page.vm.errors.site || ""; Layout.fillWidth: true }

            GridLayout {
                Layout.fillWidth: true
                columns: page.width >= 520 ? 2 : 1
                columnSpacing: 12
                rowSpacing: 6
                ColumnLayout {
                    Layout.fillWidth: true
                    PlainLabel { text: "Status"; font.bold: true }
                    ComboBox {
                        objectName: "statusBox"
                        model: page.vm.statusLabels
                        currentIndex: page.vm.statusValues.indexOf(page.vm.fields.status)
                        implicitHeight: 44
                        Layout.fillWidth: true
                        onActivated: page.vm.setField("status", page.vm.statusValues[currentIndex])
                    }
                }
                ColumnLayout {
                    Layout.fillWidth: true
                    PlainLabel { text: "Priority"; font.bold: true }
                    ComboBox {
                        objectName: "priorityBox"
                        model: page.vm.priorityLabels
                        currentIndex: page.vm.priorityValues.indexOf(page.vm.fields.priority)
                        implicitHeight: 44
                        Layout.fillWidth: true
                        onActivated: page.vm.setField("priority", page.vm.priorityValues[currentIndex])
                    }
                }
                ColumnLayout {
                    Layout.fillWidth: true
                    PlainLabel { text: "Assignee"; font.bold: true }
                    TextField {
                        objectName: "assigneeField"
                        text: page.vm.fields.assignee
                        implicitHeight: 44
                        Layout.fillWidth: true
                        onTextEdited: page.vm.setField("assignee", text)
                    }
                    ErrorLabel { text: page.vm.errors.assignee || ""; Layout.fillWidth: true }
                }
                ColumnLayout {
                    Layout.fillWidth: true
                    PlainLabel { text: "Due date"; font.bold: true }
                    TextField {
                        objectName: "dueDateField"
                        text: page.vm.fields.due_date
                        placeholderText: "YYYY-MM-DD"
                        implicitHeight: 44
                        Layout.fillWidth: true
                        inputMethodHints: Qt.ImhDate
                        onTextEdited: page.vm.setField("due_date", text)
                    }
                    ErrorLabel { objectName: "dueDateError"; text: page.vm.errors.due_date || ""; Layout.fillWidth: true }
                }
            }

            PlainLabel { text: "Notes"; font.bold: true }
            TextArea {
                objectName: "notesField"
                text: page.vm.fields.notes
                wrapMode: TextEdit.Wrap
                Layout.fillWidth: true
                Layout.preferredHeight: Math.max(120, implicitHeight)
                onTextChanged: if (activeFocus) page.vm.setField("notes", text)
            }
            ErrorLabel { text: page.vm.errors.notes || ""; Layout.fillWidth: true }
            ErrorLabel { objectName: "recordError"; text: page.vm.errors.record || ""; Layout.fillWidth: true }

            RowLayout {
                Layout.fillWidth: true
                Layout.topMargin: 8
                spacing: 8
                Button {
                    objectName: "saveButton"
                    text: page.vm.saving ? "Saving…" : "Save"
                    highlighted: true
                    enabled: page.vm.canSave
                    implicitHeight: 44
                    Layout.fillWidth: true
                    onClicked: page.vm.save()
                }
                Button {
                    objectName: "revertButton"
                    text: "Undo changes"
                    enabled: page.vm.dirty
                    implicitHeight: 44
                    Layout.fillWidth: true
                    onClicked: page.vm.revert()
                }
            }
        }
    }
}
