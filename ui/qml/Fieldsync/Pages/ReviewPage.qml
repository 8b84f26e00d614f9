// Admin review inbox: every device's escalated conflicts, newest first; decide per field or
// dismiss; past decisions with who made them and when.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Fieldsync.Controls

FsPage {
    id: page
    objectName: "reviewPage"
    required property QtObject app
    property bool wide: false
    readonly property QtObject vm: app.review

    FsLabel {
        objectName: "reviewNotice"
        visible: text !== "" && !page.vm.hasCurrent
        text: page.vm.notice
        wrapMode: Text.WordWrap
        Layout.fillWidth: true
    }
    ErrorLabel {
        objectName: "reviewError"
        text: page.vm.error
        Layout.fillWidth: true
    }

    // The inbox.
    FsHeading {
        visible: !page.vm.hasCurrent && page.vm.openConflicts.length > 0
        text: "Waiting for a decision (newest first)"
        Layout.fillWidth: true
    }
    Repeater {
        model: page.vm.hasCurrent ? [] : page.vm.openConflicts
        delegate: FsListRow {
            required property var modelData
            required property int index
            objectName: "reviewRow_" + index
            title: modelData.title
            detail: modelData.text
            note: modelData.note || ""
            Layout.fillWidth: true
            onClicked: page.vm.openReview(modelData.reviewId)
        }
    }

    // One conflict: device's side and the server's, per field.
    FsHeading {
        visible: page.vm.hasCurrent
        objectName: "reviewTitle"
        level: 1
        text: page.vm.title
        Layout.fillWidth: true
    }
    FsLabel {
        visible: page.vm.hasCurrent
        objectName: "reviewExplanation"
        text: page.vm.explanation
        wrapMode: Text.WordWrap
        Layout.fillWidth: true
    }
    Repeater {
        model: page.vm.fields
        delegate: FsCard {
            id: fieldCard
            required property var modelData
            objectName: "reviewField_" + modelData.name
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
                    columns: page.wide ? 2 : 1
                    columnSpacing: Theme.spacingM
                    rowSpacing: Theme.spacingXs
                    Layout.fillWidth: true
                    FsValue { side: "Device"; text: fieldCard.modelData.mine; chosen: fieldCard.modelData.choice === "mine" }
                    FsValue { side: "Server"; text: fieldCard.modelData.server; chosen: fieldCard.modelData.choice === "theirs" }
                }
                FsChoicePair {
                    visible: fieldCard.modelData.needsChoice
                    choice: fieldCard.modelData.choice
                    mineText: "Device's"
                    theirsText: "Server's"
                    mineName: "reviewMine_" + fieldCard.modelData.name
                    theirsName: "reviewTheirs_" + fieldCard.modelData.name
                    onChose: (side) => page.vm.choose(fieldCard.modelData.name, side)
                }
            }
        }
    }
    FsButton {
        objectName: "reviewResolveButton"
        visible: page.vm.hasCurrent
        text: page.vm.unresolvedCount > 0 ? "Choose " + page.vm.unresolvedCount + " more" : "Apply decision"
        highlighted: true
        enabled: page.vm.canResolve
        Layout.fillWidth: true
        onClicked: page.vm.resolve()
    }
    FsActionGrid {
        visible: page.vm.hasCurrent
        FsButton { objectName: "reviewAllMineButton"; text: "All device's"; Layout.fillWidth: true; onClicked: page.vm.keepAllMine() }
        FsButton { objectName: "reviewAllTheirsButton"; text: "All server's"; Layout.fillWidth: true; onClicked: page.vm.takeAllTheirs() }
        FsButton { objectName: "reviewDismissButton"; text: "Dismiss"; Layout.fillWidth: true; onClicked: page.vm.dismiss() }
        FsButton { objectName: "reviewCloseButton"; text: "Back to inbox"; Layout.fillWidth: true; onClicked: page.vm.close() }
    }

    // Past decisions.
    FsHeading {
        visible: !page.vm.hasCurrent && page.vm.decisions.length > 0
        text: "Decided"
        Layout.topMargin: Theme.spacingS
        Layout.fillWidth: true
    }
    Repeater {
        model: page.vm.hasCurrent ? [] : page.vm.decisions
        delegate: ColumnLayout {
            required property var modelData
            required property int index
            objectName: "decision_" + index
            readonly property string text: modelData.title + "\n" + modelData.text
            spacing: 2
            Layout.fillWidth: true
            Layout.bottomMargin: Theme.spacingXs
            Accessible.role: Accessible.StaticText
            Accessible.name: modelData.title + ", " + modelData.text
            FsLabel { text: modelData.title; font.bold: true; wrapMode: Text.WordWrap; Layout.fillWidth: true; Accessible.ignored: true }
            FsCaption { text: modelData.text; Layout.fillWidth: true; Accessible.ignored: true }
        }
    }
    FsButton {
        objectName: "reviewRefreshButton"
        visible: !page.vm.hasCurrent
        text: page.vm.loading ? "Refreshing…" : "Refresh"
        enabled: !page.vm.loading
        onClicked: page.vm.refresh()
    }
}
