// A work order's photos and files on its list row: the clip icon, how many, and what still
// waits to upload ("2 photos waiting"). Read as "3 attachments, 2 photos waiting".
import QtQuick
import QtQuick.Layouts
import Fieldsync.Controls

RowLayout {
    id: line
    objectName: "attachmentCount"
    property int count: 0
    property string waiting: ""
    spacing: Theme.spacingXs
    Accessible.role: Accessible.StaticText
    Accessible.name: (count === 1 ? "1 attachment" : count + " attachments") + (waiting ? ", " + waiting : "")

    AttachmentIcon { size: 18; name: "attachment"; Layout.alignment: Qt.AlignTop }
    FsLabel {
        objectName: "attachmentCountText"
        text: line.waiting ? line.count + " · " + line.waiting : String(line.count)
        color: line.waiting ? Theme.text : Theme.textMuted
        font.pixelSize: Theme.fontCaption
        // "… · 1 file failed" is the part that needs the person: wrapped, never cut off.
        wrapMode: Text.Wrap
        Layout.fillWidth: true
        Accessible.ignored: true
    }
}
