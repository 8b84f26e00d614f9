// Search every work order of the organisation on the server (online only), a page at a time;
// open a result, or keep it offline so that it arrives on this device.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Fieldsync.Controls
import Fieldsync.Components

FsPage {
    id: page
    objectName: "searchPage"
    required property QtObject app
    readonly property QtObject vm: app.search
    readonly property var current: vm.current

    FsHeading {
        level: 1
        text: "Search all work orders"
        Layout.fillWidth: true
    }
    FsCaption {
        text: "Asks the server for every work order of your organisation, not only the ones on this device."
        Layout.fillWidth: true
    }
    FsCard {
        objectName: "searchConnectionCard"
        visible: page.vm.connectionNotice !== ""
        tone: "warning"
        Layout.fillWidth: true
        RowLayout {
            anchors.left: parent.left
            anchors.right: parent.right
            spacing: Theme.spacingS
            SyncIcon { kind: "offline"; Layout.alignment: Qt.AlignTop }
            FsLabel {
                objectName: "searchConnectionNotice"
                text: page.vm.connectionNotice
                wrapMode: Text.WordWrap
                Layout.fillWidth: true
            }
        }
    }
    RowLayout {
        Layout.fillWidth: true
        spacing: Theme.spacingS
        FsTextField {
            objectName: "serverSearchField"
            text: page.vm.query
            placeholderText: "Title, site or person"
            inputMethodHints: Qt.ImhNoPredictiveText
            Layout.fillWidth: true
            Layout.minimumWidth: 120
            Accessible.name: "Search all work orders"
            Accessible.description: placeholderText
            onTextEdited: page.vm.setQuery(text)
            onAccepted: page.vm.search()
        }
        FsButton {
            objectName: "serverSearchButton"
            text: "Search"
            highlighted: true
            enabled: page.vm.canSearch && !page.vm.loading
            onClicked: page.vm.search()
        }
    }
    ErrorLabel {
        objectName: "searchError"
        text: page.vm.error
        Layout.fillWidth: true
    }
    FsCaption {
        objectName: "searchSummary"
        visible: text !== ""
        text: page.vm.summary
        Layout.fillWidth: true
    }

    // A result this device does not hold, opened: its fields as the server has them.
    FsCard {
        objectName: "searchResultDetail"
        visible: page.current.entityId !== undefined
        Layout.fillWidth: true
        ColumnLayout {
            anchors.left: parent.left
            anchors.right: parent.right
            spacing: Theme.spacingS
            FsHeading { text: page.current.title || ""; Layout.fillWidth: true }
            FsMark {
                kind: "pinned"
                iconName: "search"
                strong: true
                label: "Online only: not on this device. Keep it offline to have it here and edit it."
                Layout.fillWidth: true
            }
            FsValue { side: page.vm.fieldLabels.status; text: page.current.statusText || "" }
            FsValue { side: page.vm.fieldLabels.site; text: page.current.site || "" }
            FsValue { side: page.vm.fieldLabels.assignee; text: page.current.assignee || "" }
            FsValue { side: page.vm.fieldLabels.team; text: page.current.team || "" }
            FsValue { side: page.vm.fieldLabels.notes; text: page.current.notes || "" }
            FsActionGrid {
                maxColumns: 2
                FsButton {
                    objectName: "detailKeepOfflineButton"
                    text: "Keep offline"
                    highlighted: true
                    enabled: page.vm.canSearch
                    Layout.fillWidth: true
                    onClicked: page.vm.keepOffline(page.current.entityId)
                }
                FsButton {
                    objectName: "detailCloseButton"
                    text: "Back to results"
                    Layout.fillWidth: true
                    onClicked: page.vm.closeResult()
                }
            }
        }
    }

    Repeater {
        model: page.current.entityId !== undefined ? [] : page.vm.results
        delegate: SearchResultRow {
            required property var modelData
            required property int index
            objectName: "searchResult_" + index
            result: modelData
            Layout.fillWidth: true
            onOpened: (entityId) => page.vm.openResult(entityId)
            onKeepOffline: (entityId) => page.vm.keepOffline(entityId)
        }
    }
    FsButton {
        objectName: "searchMoreButton"
        visible: page.vm.hasMore && page.current.entityId === undefined
        text: page.vm.loading ? "Loading…" : "Show more"
        enabled: !page.vm.loading && page.vm.canSearch
        Layout.fillWidth: true
        onClicked: page.vm.loadMore()
    }
}
