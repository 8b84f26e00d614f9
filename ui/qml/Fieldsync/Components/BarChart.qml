// A small bar chart: values scaled to the tallest, optional labels under the bars.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Fieldsync.Controls

ColumnLayout {
    id: chart
    Accessible.role: Accessible.Chart
    Accessible.name: labels.length > 0 ? labels.join(", ") : values.length + " values, at most " + maximum
    property var values: []
    property var labels: []
    property int maximum: 1
    property color barColor: Theme.accent
    readonly property bool allZero: {
        for (var i = 0; i < values.length; i++) {
            if (values[i] > 0)
                return false
        }
        return true
    }
    spacing: 2

    Item {
        Layout.fillWidth: true
        Layout.preferredHeight: 90
        Rectangle {
            anchors.fill: parent
            color: "transparent"
            border.color: Theme.divider
            radius: Theme.radius / 2
        }
        Row {
            id: bars
            anchors.fill: parent
            anchors.margins: 4
            spacing: chart.values.length > 40 ? 1 : 4
            Repeater {
                model: chart.values
                // A full-height slot per value: a Row skips zero-height items, which shifted
                // every later bar under the wrong label.
                Item {
                    required property var modelData
                    width: Math.max(1, (bars.width - bars.spacing * (chart.values.length - 1)) / Math.max(1, chart.values.length))
                    height: bars.height
                    Rectangle {
                        anchors.bottom: parent.bottom
                        width: parent.width
                        height: Math.max(modelData > 0 ? 2 : 0, bars.height * modelData / Math.max(1, chart.maximum))
                        color: chart.barColor
                    }
                }
            }
        }
        FsCaption {
            anchors.centerIn: parent
            visible: chart.allZero
            text: "No data yet"
        }
    }
    Row {
        visible: chart.labels.length > 0
        Layout.fillWidth: true
        leftPadding: 4  // under the bars, which sit inside a 4 px margin
        spacing: 4
        Repeater {
            model: chart.labels
            PlainLabel {
                required property var modelData
                width: (chart.width - 8 - 4 * (chart.labels.length - 1)) / Math.max(1, chart.labels.length)
                horizontalAlignment: Text.AlignHCenter
                elide: Text.ElideRight
                text: modelData
                font.pixelSize: Theme.fontCaption
            }
        }
    }
}
