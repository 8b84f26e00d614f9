// A menu entry, 48 px tall, named by its text (Qt's MenuItem left the name empty for AT-SPI).
import QtQuick
import QtQuick.Controls

MenuItem {
    implicitHeight: Theme.controlHeight
    font.pixelSize: Theme.fontBody
    Accessible.name: text
}
