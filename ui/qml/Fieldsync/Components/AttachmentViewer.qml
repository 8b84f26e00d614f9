// One photo or file full screen: the picture (or the file's name and size), its upload state in
// full, Retry when it failed, and Remove (asked first). Opened and closed by the view-model.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Fieldsync.Controls

Popup {
    id: viewer
    objectName: "attachmentViewer"
    required property QtObject vm
    readonly property var item: vm.viewed
    readonly property bool shown: item.attachmentId !== undefined
    parent: Overlay.overlay
    x: 0
    y: 0
    width: parent ? parent.width : 360
    height: parent ? parent.height : 720
    padding: 0
    modal: true
    focus: true
    closePolicy: Popup.CloseOnEscape
    visible: vm.viewerOpen
    onClosed: { confirmRemove.visible = false; viewer.vm.closeViewer() }
    background: Rectangle { color: Theme.window }

    ColumnLayout {
        anchors.fill: parent
        spacing: 0
        Rectangle {
            color: Theme.surfaceRaised
            Layout.fillWidth: true
            implicitHeight: Theme.controlHeight + Theme.spacingXs * 2
            RowLayout {
                anchors.fill: parent
                anchors.leftMargin: Theme.spacingXs
                anchors.rightMargin: Theme.spacingXs
                FsToolButton {
                    objectName: "viewerCloseButton"
                    text: "Close"
                    iconName: "back"
                    onClicked: viewer.close()
                }
                FsLabel {
                    objectName: "viewerTitle"
                    text: viewer.shown ? viewer.item.filename : ""
                    font.bold: true
                    font.pixelSize: Theme.fontSubtitle
                    wrapMode: Text.WrapAnywhere
                    maximumLineCount: 2
                    Layout.fillWidth: true
                    Accessible.role: Accessible.Heading
                }
            }
            FsDivider { anchors.bottom: parent.bottom; width: parent.width }
        }
        Item {
            Layout.fillWidth: true
            Layout.fillHeight: true
            Image {
                objectName: "viewerImage"
                anchors.fill: parent
                anchors.margins: Theme.spacingS
                visible: viewer.shown && viewer.item.imageUrl !== ""
                source: viewer.shown ? viewer.item.imageUrl : ""
                fillMode: Image.PreserveAspectFit
                asynchronous: true
                Accessible.role: Accessible.Graphic
                Accessible.name: viewer.shown ? viewer.item.filename : ""
            }
            ColumnLayout {
                anchors.centerIn: parent
                width: parent.width - 2 * Theme.pageMargin
                visible: viewer.shown && viewer.item.imageUrl === ""
                spacing: Theme.spacingS
                AttachmentIcon {
                    size: 96
                    name: viewer.shown && viewer.item.isImage ? "attachment" : "file"
                    Layout.alignment: Qt.AlignHCenter
                }
                FsLabel {
                    text: viewer.shown ? viewer.item.kindText + ", " + viewer.item.sizeText : ""
                    horizontalAlignment: Text.AlignHCenter
                    wrapMode: Text.WordWrap
                    Layout.fillWidth: true
                }
            }
        }
        ColumnLayout {
            Layout.fillWidth: true
            Layout.maximumWidth: Theme.maxContentWidth
            Layout.alignment: Qt.AlignHCenter
            Layout.margins: Theme.pageMargin
            spacing: Theme.spacingS
            FsLabel {
                objectName: "viewerState"
                text: viewer.shown ? viewer.item.stateText + " · " + viewer.item.sizeText : ""
                color: viewer.shown && viewer.item.state === "failed" ? Theme.error : Theme.text
                wrapMode: Text.WordWrap
                Layout.fillWidth: true
            }
            FsProgressBar {
                visible: viewer.shown && viewer.item.progress >= 0
                value: viewer.shown ? Math.max(0, viewer.item.progress) : 0
                words: viewer.shown ? viewer.item.stateText : ""
                Layout.fillWidth: true
            }
            RowLayout {
                visible: !confirmRemove.visible
                Layout.fillWidth: true
                spacing: Theme.spacingS
                FsButton {
                    objectName: "viewerRetryButton"
                    visible: viewer.shown && viewer.item.canRetry
                    text: "Retry"
                    highlighted: true
                    Layout.fillWidth: true
                    Layout.preferredWidth: 1
                    onClicked: viewer.vm.retry(viewer.item.attachmentId)
                }
                FsButton {
                    objectName: "viewerRemoveButton"
                    text: "Remove…"
                    Layout.fillWidth: true
                    Layout.preferredWidth: 1
                    onClicked: confirmRemove.visible = true
                }
            }
            FsCard {
                id: confirmRemove
                objectName: "confirmRemove"
                visible: false
                tone: "warning"
                Layout.fillWidth: true
                ColumnLayout {
                    width: parent.width
                    FsLabel {
                        text: viewer.shown && viewer.item.state === "uploaded"
                              ? "Remove " + viewer.item.filename + " from this work order? It is removed on the server too."
                              : "Remove " + (viewer.shown ? viewer.item.filename : "") + "? It has not reached the server and will not be sent."
                        wrapMode: Text.WordWrap
                        Layout.fillWidth: true
                    }
                    RowLayout {
                        Layout.fillWidth: true
                        FsButton {
                            objectName: "confirmRemoveButton"
                            text: "Remove"
                            Layout.fillWidth: true
                            Layout.preferredWidth: 1
                            onClicked: {
                                confirmRemove.visible = false
                                viewer.vm.remove(viewer.item.attachmentId)
                            }
                        }
                        FsButton {
                            objectName: "keepAttachmentButton"
                            text: "Keep it"
                            Layout.fillWidth: true
                            Layout.preferredWidth: 1
                            onClicked: confirmRemove.visible = false
                        }
                    }
                }
            }
        }
    }
}
