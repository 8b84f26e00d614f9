// A thin rule between sections.
import QtQuick
import QtQuick.Layouts

Rectangle {
    implicitHeight: Theme.borderWidth
    implicitWidth: Theme.borderWidth
    color: Theme.divider
    Layout.fillWidth: true
}
