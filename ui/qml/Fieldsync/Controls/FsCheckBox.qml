// A check box with a 48 px touch target.
import QtQuick
import QtQuick.Controls

CheckBox {
    implicitHeight: Theme.controlHeight
    implicitWidth: Math.max(Theme.controlHeight, implicitContentWidth + leftPadding + rightPadding)
    font.pixelSize: Theme.fontBody
    Accessible.name: text
}
