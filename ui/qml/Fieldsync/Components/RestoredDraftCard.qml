// Typing kept from an earlier run, back on the form: when it was typed, Keep or Discard, and
// each field the server changed too, with both values and a choice.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Fieldsync.Controls

FsCard {
    id: card
    required property QtObject vm
    tone: vm.choosing ? "warning" : ""
    visible: vm.restored || vm.choosing

    ColumnLayout {
        anchors.left: parent.left
        anchors.right: parent.right
        spacing: Theme.spacingS
        FsLabel {
            objectName: "restoredDraftText"
            visible: card.vm.restored
            text: card.vm.restoredText
            font.bold: true
            wrapMode: Text.WordWrap
            Layout.fillWidth: true
        }
        FsLabel {
            objectName: "draftMergeText"
            visible: text !== ""
            text: card.vm.mergeText
            wrapMode: Text.WordWrap
            Layout.fillWidth: true
        }
        Repeater {
            model: card.vm.choices
            delegate: ColumnLayout {
                id: choice
                required property var modelData
                spacing: Theme.spacingXs
                Layout.fillWidth: true
                FsLabel {
                    text: choice.modelData.label + " — yours: \u201c" + choice.modelData.mine
                          + "\u201d; on the server: \u201c" + choice.modelData.server + "\u201d"
                    wrapMode: Text.WordWrap
                    Layout.fillWidth: true
                }
                FsActionGrid {
                    maxColumns: 2
                    FsButton {
                        text: "Keep mine"
                        Accessible.name: "Keep my " + choice.modelData.label
                        Layout.fillWidth: true
                        onClicked: card.vm.chooseMine(choice.modelData.name)
                    }
                    FsButton {
                        text: "Use the server's"
                        Accessible.name: "Use the server's " + choice.modelData.label
                        Layout.fillWidth: true
                        onClicked: card.vm.chooseServer(choice.modelData.name)
                    }
                }
            }
        }
        FsActionGrid {
            visible: card.vm.restored
            maxColumns: 2
            FsButton {
                objectName: "keepDraftButton"
                text: "Keep"
                highlighted: true
                Layout.fillWidth: true
                onClicked: card.vm.keep()
            }
            FsButton {
                objectName: "discardDraftButton"
                text: "Discard"
                Layout.fillWidth: true
                onClicked: card.vm.discard()
            }
        }
    }
}
