// One choice of a row of filters ("Mine", "My team"…): 48 px tall, the accent colour when
// chosen, narrow padding so four fit a phone. Its accessible name is its label.
import QtQuick
import QtQuick.Controls

FsButton {
    checkable: true
    leftPadding: Theme.spacingXs
    rightPadding: Theme.spacingXs
    font.bold: checked
    Accessible.checkable: true
    Accessible.checked: checked
}
