// One work order in the list: title, where/who, status, and its sync badge (tap for details).
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts

ItemDelegate {
    id: row
    required property int index
    required property string entityId
    required property string title
    required property string subtitle
    required property string statusText
    required property string badge
    required property string badgeText
    required property string badgeDetail
    property bool showDetail: false
    signal opened(string entityId)

    objectName: "workOrderRow_" + index
    implicitHeight: Math.max(64, column.implicitHeight + 16)
    onClicked: row.opened(row.entityId)
    ToolTip.visible: hovered && badge !== "synced"
    ToolTip.text: badgeDetail
    ToolTip.delay: 600

    contentItem: ColumnLayout {
        id: column
        spacing: 2
        RowLayout {
            Layout.fillWidth: true
            spacing: 8
            ColumnLayout {
                Layout.fillWidth: true
                spacing: 2
                PlainLabel {
                    text: row.title
                    font.bold: true
                    elide: Text.ElideRight
                    Layout.fillWidth: true
                }
                PlainLabel {
                    text: row.subtitle ? row.statusText + " · " + row.subtitle : row.statusText
                    color: row.palette.placeholderText
                    elide: Text.ElideRight
                    Layout.fillWidth: true
                }
            }
            Item {
                objectName: "badgeTapArea"
                implicitWidth: Math.max(44, badgePill.implicitWidth)
                implicitHeight: 44
                Layout.maximumWidth: row.width * 0.45
                SyncBadge {
                    id: badgePill
                    objectName: "syncBadge"
                    anchors.centerIn: parent
                    width: Math.min(implicitWidth, parent.width)
                    kind: row.badge
                    text: row.badgeText
                }
                TapHandler {
                    onTapped: row.showDetail = !row.showDetail
                }
            }
        }
        PlainLabel {
            objectName: "badgeDetail"
            visible: row.showDetail
            text: row.badgeDetail
            wrapMode: Text.WordWrap
            Layout.fillWidth: true
        }
    }
}
