// A work order that left this device's scope but still has edits not delivered: says so in
// words, says what will happen, and lets the person discard the edits (asked twice).
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Fieldsync.Controls

FsCard {
    id: card
    required property QtObject vm
    property bool confirming: false
    tone: "warning"
    visible: vm.outOfScope
    onVisibleChanged: confirming = false

    ColumnLayout {
        anchors.left: parent.left
        anchors.right: parent.right
        spacing: Theme.spacingS
        FsMark {
            objectName: "noLongerAssignedMark"
            kind: "away"
            iconName: "away"
            strong: true
            label: "No longer assigned to you"
            Layout.fillWidth: true
        }
        FsLabel {
            objectName: "noLongerAssignedText"
            text: card.vm.outOfScopeText
            wrapMode: Text.WordWrap
            Layout.fillWidth: true
        }
        FsLabel {
            objectName: "discardQuestion"
            visible: card.confirming
            text: "Discard your edits of this work order? They were never sent and cannot be recovered."
            wrapMode: Text.WordWrap
            font.bold: true
            Layout.fillWidth: true
        }
        FsActionGrid {
            maxColumns: 2
            FsButton {
                objectName: "discardEditsButton"
                visible: !card.confirming && card.vm.canDiscard
                text: "Discard my edits"
                Layout.fillWidth: true
                onClicked: card.confirming = true
            }
            FsButton {
                objectName: "confirmDiscardButton"
                visible: card.confirming
                text: "Discard edits"
                highlighted: true
                enabled: card.vm.canDiscard
                Layout.fillWidth: true
                onClicked: {
                    card.confirming = false
                    card.vm.discardEdits()
                }
            }
            FsButton {
                objectName: "keepEditsButton"
                visible: card.confirming
                text: "Keep them"
                Layout.fillWidth: true
                onClicked: card.confirming = false
            }
        }
    }
}
