// Create or edit a work order; unsynced edits are marked; Save validates with the server's rules;
// its photos and files below.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Fieldsync.Controls
import Fieldsync.Components

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

    RestoredDraftCard {
        objectName: "restoredDraftCard"
        vm: page.vm.draft
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

    NoLongerAssignedCard {
        objectName: "noLongerAssignedCard"
        vm: page.app.keepOffline
        Layout.fillWidth: true
    }

    WorkOrderFields {
        fields: page.vm.fields
        errors: page.vm.errors
        twoColumns: page.twoColumns
        statusValues: page.vm.statusValues
        statusLabels: page.vm.statusLabels
        priorityValues: page.vm.priorityValues
        priorityLabels: page.vm.priorityLabels
        fieldLabels: page.vm.fieldLabels
        Layout.fillWidth: true
        onEdited: (name, value) => page.vm.setField(name, value)
    }

    KeepOfflineCard {
        objectName: "keepOfflineCard"
        vm: page.app.keepOffline
        Layout.fillWidth: true
    }

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

    // Photos and files are kept on their own (not part of Save): each is queued once added.
    FsDivider { Layout.fillWidth: true; Layout.topMargin: Theme.spacingS }
    AttachmentStrip {
        vm: page.app.attachments
        Layout.fillWidth: true
    }
}
