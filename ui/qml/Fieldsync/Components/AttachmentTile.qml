// One photo or file in the editor's strip: its thumbnail (tap: full screen), name, upload state
// in words ("Uploading 45 %", "Waiting for Wi-Fi", "Failed: …") with a bar, and Retry.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Fieldsync.Controls

FsCard {
    id: tile
    required property int index
    required property string attachmentId
    required property string filename
    required property string kindText
    required property bool isImage
    required property string imageUrl
    required property string sizeText
    required property string state
    required property string stateText
    required property real progress
    required property bool canRetry
    signal viewRequested(string attachmentId)
    signal retryRequested(string attachmentId)

    objectName: "attachmentTile_" + index
    tone: tile.state === "failed" ? "error" : ""
    padding: Theme.spacingS

    ColumnLayout {
        width: parent.width
        spacing: Theme.spacingXs
        AbstractButton {
            objectName: "attachmentThumb_" + tile.index
            Layout.fillWidth: true
            implicitHeight: 96
            Accessible.role: Accessible.Button
            Accessible.name: tile.filename
            Accessible.description: tile.stateText
            onClicked: tile.viewRequested(tile.attachmentId)
            contentItem: Item {
                Image {
                    objectName: "attachmentImage_" + tile.index
                    anchors.fill: parent
                    visible: tile.imageUrl !== "" && status === Image.Ready
                    source: tile.imageUrl
                    sourceSize.width: 256
                    sourceSize.height: 256
                    fillMode: Image.PreserveAspectCrop
                    asynchronous: true
                    clip: true
                    Accessible.ignored: true
                }
                AttachmentIcon {
                    anchors.centerIn: parent
                    visible: tile.imageUrl === ""
                    name: tile.isImage ? "attachment" : "file"
                }
            }
            background: Rectangle {
                radius: Theme.radius / 2
                color: parent.down ? Theme.divider : Theme.surface
                border.width: parent.visualFocus ? 2 : 0
                border.color: Theme.focus
            }
        }
        FsLabel {
            // Camera names ("IMG_20261201_083015.jpg") differ at the end: two lines, not an
            // ellipsis in the middle of a phone's half-width tile.
            objectName: "attachmentName_" + tile.index
            text: tile.filename
            font.bold: true
            wrapMode: Text.Wrap
            maximumLineCount: 2
            elide: Text.ElideRight
            Layout.fillWidth: true
            Accessible.ignored: true
        }
        FsLabel {
            objectName: "attachmentState_" + tile.index
            text: tile.stateText
            color: tile.state === "failed" ? Theme.error : Theme.text
            font.pixelSize: Theme.fontCaption
            wrapMode: Text.WordWrap
            Layout.fillWidth: true
        }
        FsProgressBar {
            objectName: "attachmentProgress_" + tile.index
            visible: tile.progress >= 0
            value: Math.max(0, tile.progress)
            words: tile.stateText
            Layout.fillWidth: true
        }
        FsButton {
            objectName: "attachmentRetry_" + tile.index
            visible: tile.canRetry
            text: "Retry"
            // Several tiles may have failed: the name says which file is sent again.
            Accessible.name: "Retry: " + tile.filename
            Layout.fillWidth: true
            onClicked: tile.retryRequested(tile.attachmentId)
        }
    }
}
