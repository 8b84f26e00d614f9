// A determinate progress bar in the accent colour, read by a screen reader as its words.
import QtQuick
import QtQuick.Controls

ProgressBar {
    id: bar
    property string words: ""
    implicitHeight: 6
    Accessible.name: words
    background: Rectangle {
        implicitHeight: 6
        radius: 3
        color: Theme.divider
    }
    contentItem: Item {
        implicitHeight: 6
        Rectangle {
            width: bar.visualPosition * parent.width
            height: parent.height
            radius: 3
            color: Theme.accent
        }
    }
}
