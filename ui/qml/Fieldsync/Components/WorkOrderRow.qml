// One work order in the list: title, status and where/who, and its sync badge (tap it for the
// reason). Reads to a screen reader as "<title>, <sync state>".
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Fieldsync.Controls

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
    required property string offlineText
    required property bool pinned
    required property string scopeText
    required property string scopeDetail
    required property int attachmentCount
    required property string attachmentsWaiting
    required property string draftText
    property bool showDetail: false
    signal opened(string entityId)

    objectName: "workOrderRow_" + index
    implicitHeight: Math.max(Theme.rowHeight, column.implicitHeight + topPadding + bottomPadding)
    topPadding: Theme.spacingS
    bottomPadding: Theme.spacingS
    leftPadding: Theme.spacingM
    rightPadding: Theme.spacingS
    onClicked: row.opened(row.entityId)
    ToolTip.visible: hovered && badge !== "synced"
    ToolTip.text: badgeDetail
    ToolTip.delay: 600
    Accessible.role: Accessible.ListItem
    Accessible.name: row.title + ", " + row.badgeText + (row.scopeText ? ", " + row.scopeText : "")
    Accessible.description: [row.draftText, row.scopeDetail, row.offlineText, row.badgeDetail].filter(Boolean).join(". ")

    background: Rectangle {
        color: row.down ? Theme.divider : row.hovered ? Theme.surfaceRaised : Theme.window
        FsDivider { anchors.bottom: parent.bottom; width: parent.width; opacity: 0.5 }
    }

    contentItem: ColumnLayout {
        id: column
        spacing: Theme.spacingXs
        RowLayout {
            Layout.fillWidth: true
            spacing: Theme.spacingS
            ColumnLayout {
                Layout.fillWidth: true
                spacing: 2
                FsLabel {
                    text: row.title
                    font.bold: true
                    elide: Text.ElideRight
                    Layout.fillWidth: true
                    Accessible.ignored: true
                }
                FsLabel {
                    text: row.subtitle ? row.statusText + " · " + row.subtitle : row.statusText
                    color: Theme.textMuted
                    font.pixelSize: Theme.fontCaption
                    // "Team so…" said nothing at 360 px: the whole line, wrapped.
                    wrapMode: Text.Wrap
                    Layout.fillWidth: true
                    Accessible.ignored: true
                }
                FsMark {
                    objectName: "offlineMark"
                    kind: row.pinned ? "pinned" : "offline"
                    iconName: row.pinned ? "pin" : "offline"
                    label: row.offlineText
                    visible: row.offlineText !== ""
                    Layout.fillWidth: true
                    Accessible.ignored: true
                }
                FsMark {
                    // Typing kept through a kill: open the row to keep or discard it.
                    objectName: "draftMark"
                    kind: "away"
                    iconName: "sync-pending"
                    strong: true
                    label: row.draftText
                    visible: row.draftText !== ""
                    Layout.fillWidth: true
                    Accessible.ignored: true
                }
                AttachmentCount {
                    visible: row.attachmentCount > 0
                    count: row.attachmentCount
                    waiting: row.attachmentsWaiting
                    Layout.fillWidth: true
                }
            }
            Item {
                objectName: "badgeTapArea"
                implicitWidth: Math.max(Theme.controlHeight, badgePill.implicitWidth)
                implicitHeight: Theme.controlHeight
                Layout.maximumWidth: row.width * 0.45
                Accessible.role: Accessible.Button
                Accessible.name: row.badgeText
                Accessible.description: "Why: " + row.badgeDetail
                Accessible.onPressAction: row.showDetail = !row.showDetail
                SyncBadge {
                    id: badgePill
                    objectName: "syncBadge"
                    anchors.centerIn: parent
                    width: Math.min(implicitWidth, parent.width)
                    kind: row.badge
                    text: row.badgeText
                    Accessible.ignored: true
                }
                TapHandler {
                    onTapped: row.showDetail = !row.showDetail
                }
            }
        }
        FsMark {
            objectName: "scopeMark"
            kind: "away"
            iconName: "away"
            strong: true
            visible: row.scopeText !== ""
            label: row.scopeText + " — " + row.scopeDetail
            Layout.fillWidth: true
            Accessible.ignored: true
        }
        FsCaption {
            objectName: "badgeDetail"
            visible: row.showDetail
            text: row.badgeDetail
            color: Theme.text
            Layout.fillWidth: true
        }
    }
}
