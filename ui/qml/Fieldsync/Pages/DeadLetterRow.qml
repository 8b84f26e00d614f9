// One failed change in the list of DeadLetterPage: its check box and cells, a table row on a
// wide window, stacked on a phone. Tapping it selects the change for DeadLetterForm.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Fieldsync.Controls

ItemDelegate {
    id: row
    // The list's view-model (ui/viewmodels/deadletters.py) and the page's layout.
    property QtObject vm
    property bool wide: false
    required property int index
    required property int jobId
    required property string when
    required property string title
    required property string op
    required property int attempts
    required property string errorText
    // After the row is selected: the page brings the details below every row into view.
    signal chosen()

    objectName: "deadRow_" + index
    Layout.fillWidth: true
    highlighted: row.vm.selectedJobId === jobId
    background: Rectangle {
        radius: Theme.radius
        color: row.down ? Theme.divider : row.highlighted ? Theme.surface : Theme.surfaceRaised
        border.width: row.highlighted ? 2 : Theme.borderWidth
        border.color: row.highlighted ? Theme.accent : Theme.divider
    }
    implicitHeight: Math.max(Theme.rowHeight, cells.implicitHeight + 12)
    Accessible.role: Accessible.ListItem
    Accessible.name: row.title + ", " + row.errorText
    onClicked: {
        row.vm.select(jobId)
        row.chosen()
    }
    contentItem: RowLayout {
        id: cells
        spacing: Theme.spacingS
        FsCheckBox {
            objectName: "deadCheck_" + row.index
            checked: row.vm.get(row.index).checked === true
            implicitWidth: Theme.controlHeight
            onToggled: row.vm.setChecked(row.jobId, checked)
            Accessible.name: "Select " + row.title
        }
        GridLayout {
            columns: row.wide ? 5 : 1
            columnSpacing: 8
            rowSpacing: 2
            Layout.fillWidth: true
            PlainLabel {
                text: row.wide ? row.when : row.title
                font.bold: !row.wide
                elide: Text.ElideRight
                Layout.preferredWidth: row.wide ? 130 : -1
                Layout.fillWidth: !row.wide
            }
            PlainLabel {
                text: row.wide ? row.title : row.op + " · " + row.when + " · " + row.attempts + (row.attempts === 1 ? " try" : " tries")
                elide: Text.ElideRight
                Layout.preferredWidth: row.wide ? 160 : -1
                Layout.fillWidth: !row.wide
            }
            PlainLabel { visible: row.wide; text: row.op; Layout.preferredWidth: 60 }
            PlainLabel { visible: row.wide; text: row.attempts; Layout.preferredWidth: 40 }
            PlainLabel {
                text: row.errorText
                wrapMode: Text.WordWrap
                maximumLineCount: 3
                elide: Text.ElideRight
                Layout.fillWidth: true
            }
        }
    }
}
