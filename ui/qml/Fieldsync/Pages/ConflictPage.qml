// One conflict: base / mine / server per field, choose per field or all at once, or ask an admin.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Fieldsync.Controls

FsPage {
    id: page
    objectName: "conflictPage"
    required property QtObject app
    property bool wide: false
    readonly property QtObject vm: app.conflicts

    // No conflict chosen: the open ones.
    FsLabel {
        visible: !page.vm.hasCurrent
        text: page.vm.openConflicts.length === 0 ? "No open conflicts." : "Open conflicts — choose one:"
        wrapMode: Text.WordWrap
        Layout.fillWidth: true
    }
    Repeater {
        model: page.vm.hasCurrent ? [] : page.vm.openConflicts
        delegate: FsListRow {
            required property var modelData
            required property int index
            objectName: "conflictRow_" + index
            title: modelData.title
            detail: modelData.text + (modelData.waiting ? " (waiting for review)" : "")
            Layout.fillWidth: true
            onClicked: page.vm.openJob(modelData.jobId)
        }
    }

    FsHeading {
        visible: page.vm.hasCurrent
        objectName: "conflictTitle"
        level: 1
        text: page.vm.title
        Layout.fillWidth: true
    }
    FsLabel {
        visible: page.vm.hasCurrent
        objectName: "conflictExplanation"
        text: page.vm.explanation
        wrapMode: Text.WordWrap
        Layout.fillWidth: true
    }

    Repeater {
        model: page.vm.fields
        delegate: FsCard {
            id: fieldCard
            required property var modelData
            required property int index
            objectName: "conflictField_" + modelData.name
            tone: modelData.needsChoice && modelData.choice === "" ? "warning" : ""
            Layout.fillWidth: true
            ColumnLayout {
                anchors.left: parent.left
                anchors.right: parent.right
                spacing: Theme.spacingS
                FsLabel {
                    text: fieldCard.modelData.label
                    font.bold: true
                    wrapMode: Text.WordWrap
                    Layout.fillWidth: true
                }
                FsCaption { text: fieldCard.modelData.stateText; color: Theme.text; Layout.fillWidth: true }
                GridLayout {
                    columns: page.wide ? 3 : 1
                    columnSpacing: Theme.spacingM
                    rowSpacing: Theme.spacingXs
                    Layout.fillWidth: true
                    FsValue { side: "Before"; text: fieldCard.modelData.base }
                    FsValue { side: "Mine"; text: fieldCard.modelData.mine; chosen: fieldCard.modelData.choice === "mine" }
                    FsValue { side: "Server"; text: fieldCard.modelData.server; chosen: fieldCard.modelData.choice === "theirs" }
                }
                FsChoicePair {
                    visible: fieldCard.modelData.needsChoice
                    choice: fieldCard.modelData.choice
                    mineText: "Keep mine"
                    theirsText: "Take theirs"
                    mineName: "mine_" + fieldCard.modelData.name
                    theirsName: "theirs_" + fieldCard.modelData.name
                    onChose: (side) => page.vm.choose(fieldCard.modelData.name, side)
                }
            }
        }
    }

    FsButton {
        objectName: "resolveButton"
        visible: page.vm.hasCurrent && !page.vm.waitingForReview
        text: page.vm.unresolvedCount > 0 ? "Choose " + page.vm.unresolvedCount + " more" : "Save my choices"
        highlighted: true
        enabled: page.vm.canResolve
        Layout.fillWidth: true
        onClicked: page.vm.resolve()
    }
    // These decide the whole conflict at once (the per-field buttons only choose): they ask
    // first. Two columns on a phone, so they line up instead of piling up.
    FsActionGrid {
        visible: page.vm.hasCurrent && !page.vm.waitingForReview
        FsButton { objectName: "keepAllMineButton"; text: "Keep all mine"; Layout.fillWidth: true; onClicked: confirmAll.side = "mine" }
        FsButton { objectName: "takeAllTheirsButton"; text: "Take all theirs"; Layout.fillWidth: true; onClicked: confirmAll.side = "theirs" }
        FsButton { visible: page.vm.canRestore; text: "Restore it"; Layout.fillWidth: true; onClicked: page.vm.restore() }
        FsButton { objectName: "laterButton"; text: "Resolve later"; Layout.fillWidth: true; onClicked: page.vm.later() }
    }
    FsCard {
        id: confirmAll
        objectName: "confirmAll"
        property string side: ""
        visible: side !== "" && page.vm.hasCurrent
        tone: "warning"
        Layout.fillWidth: true
        ColumnLayout {
            anchors.left: parent.left
            anchors.right: parent.right
            spacing: Theme.spacingS
            FsLabel {
                text: confirmAll.side === "mine"
                      ? "Keep your values for every field? The server's changes to them are replaced."
                      : "Take the server's values for every field? Your edits to them are dropped."
                wrapMode: Text.WordWrap
                Layout.fillWidth: true
            }
            RowLayout {
                Layout.fillWidth: true
                spacing: Theme.spacingS
                FsButton {
                    objectName: "confirmAllButton"
                    text: confirmAll.side === "mine" ? "Keep all mine" : "Take all theirs"
                    highlighted: true
                    Layout.fillWidth: true
                    Layout.preferredWidth: 1
                    onClicked: {
                        const side = confirmAll.side
                        confirmAll.side = ""
                        if (side === "mine")
                            page.vm.keepAllMine()
                        else
                            page.vm.takeAllTheirs()
                    }
                }
                FsButton {
                    text: "Cancel"
                    Layout.fillWidth: true
                    Layout.preferredWidth: 1
                    onClicked: confirmAll.side = ""
                }
            }
        }
    }
    FsDivider { visible: page.vm.hasCurrent && !page.vm.waitingForReview; Layout.topMargin: Theme.spacingS }
    FsField {
        id: note
        visible: page.vm.hasCurrent && !page.vm.waitingForReview
        label: "Note for the admin"
        hint: "optional"
        inputName: "adminNote"
        Layout.fillWidth: true
    }
    FsButton {
        objectName: "sendToAdminButton"
        visible: page.vm.hasCurrent && !page.vm.waitingForReview
        text: "Send to admin"
        Layout.fillWidth: !page.wide
        onClicked: page.vm.sendToAdmin(note.text)
    }
}
