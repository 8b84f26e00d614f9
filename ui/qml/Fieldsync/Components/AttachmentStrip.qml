// The editor's photos and files: "Add photo or file" (a FileDialog; the FileChooser portal
// inside the Flatpak), a strip of tiles with each upload's state, and the full-screen view.
import QtQuick
import QtQuick.Controls
import QtQuick.Dialogs
import QtQuick.Layouts
import Fieldsync.Controls

ColumnLayout {
    id: strip
    required property QtObject vm
    readonly property int columns: Math.max(2, Math.floor((width + Theme.spacingS) / (150 + Theme.spacingS)))
    readonly property real tileWidth: (width - (columns - 1) * Theme.spacingS) / columns
    spacing: Theme.spacingS

    FsHeading {
        objectName: "attachmentsHeading"
        text: strip.vm.heading
        Layout.fillWidth: true
    }
    FsCaption {
        objectName: "attachmentsHint"
        visible: text !== ""
        text: strip.vm.hint
        Layout.fillWidth: true
    }
    Flow {
        objectName: "attachmentStrip"
        visible: strip.vm.count > 0
        spacing: Theme.spacingS
        Layout.fillWidth: true
        Repeater {
            model: strip.vm
            delegate: AttachmentTile {
                width: strip.tileWidth
                onViewRequested: (attachmentId) => strip.vm.openViewer(attachmentId)
                onRetryRequested: (attachmentId) => strip.vm.retry(attachmentId)
            }
        }
    }
    FsButton {
        objectName: "addAttachmentButton"
        text: "Add photo or file"
        enabled: strip.vm.canAdd
        Layout.fillWidth: true
        onClicked: strip.vm.chooseFile()
    }

    FileDialog {
        id: fileDialog
        objectName: "attachmentDialog"
        title: "Add photo or file"
        fileMode: FileDialog.OpenFile
        nameFilters: ["Photos and documents (*.jpg *.jpeg *.png *.webp *.gif *.heic *.pdf *.txt *.m4a *.mp3 *.ogg *.opus *.wav)", "All files (*)"]
        currentFolder: strip.vm.folderUrl
        onAccepted: strip.vm.attach(selectedFile.toString())
    }
    Connections {
        target: strip.vm
        function onFileWanted() { fileDialog.open() }
    }

    AttachmentViewer {
        vm: strip.vm
    }
}
