// An on/off setting with its label; 48 px tall, the whole row toggles it.
import QtQuick
import QtQuick.Controls

Switch {
    implicitHeight: Theme.controlHeight
    font.pixelSize: Theme.fontBody
    Accessible.name: text
}
