// Two side-by-side choices for one field ("Keep mine" / "Take theirs"); the chosen one is
// filled. Emits chose("mine") or chose("theirs").
import QtQuick
import QtQuick.Layouts

RowLayout {
    id: pair
    property string choice: ""
    property alias mineText: mine.text
    property alias theirsText: theirs.text
    property alias mineName: mine.objectName
    property alias theirsName: theirs.objectName
    signal chose(string side)
    spacing: Theme.spacingS
    Layout.fillWidth: true
    FsButton {
        id: mine
        checkable: true
        checked: pair.choice === "mine"
        Layout.fillWidth: true
        Layout.preferredWidth: 1
        onClicked: pair.chose("mine")
    }
    FsButton {
        id: theirs
        checkable: true
        checked: pair.choice === "theirs"
        Layout.fillWidth: true
        Layout.preferredWidth: 1
        onClicked: pair.chose("theirs")
    }
}
