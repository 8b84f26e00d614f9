// The window: a phone column (list -> page -> back) below 900 px, two panes above.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Fieldsync.Controls
import Fieldsync.Components
import Fieldsync.Pages

ApplicationWindow {
    id: window
    objectName: "mainWindow"
    required property QtObject app
    readonly property bool wide: width >= 900
    width: 1280
    height: 800
    visible: true
    title: app.title + " — Fieldsync"
    color: Theme.window
    // WORKAROUND: the window's controls kept the palette they were created with when
    // ui/window.py set the dark one after loading (white check boxes, grey switch text on
    // dark). Bound here, every control follows the application palette through Theme.
    palette.window: Theme.palette.window
    palette.windowText: Theme.palette.windowText
    palette.base: Theme.palette.base
    palette.alternateBase: Theme.palette.alternateBase
    palette.text: Theme.palette.text
    palette.placeholderText: Theme.palette.placeholderText
    palette.button: Theme.palette.button
    palette.buttonText: Theme.palette.buttonText
    palette.highlight: Theme.palette.highlight
    palette.highlightedText: Theme.palette.highlightedText
    palette.light: Theme.palette.light
    palette.midlight: Theme.palette.midlight
    palette.mid: Theme.palette.mid
    palette.dark: Theme.palette.dark
    palette.shadow: Theme.palette.shadow
    palette.toolTipBase: Theme.palette.toolTipBase
    palette.toolTipText: Theme.palette.toolTipText
    palette.link: Theme.palette.link
    palette.disabled.windowText: Theme.disabledPalette.windowText
    palette.disabled.text: Theme.disabledPalette.text
    palette.disabled.buttonText: Theme.disabledPalette.buttonText
    font.pixelSize: Theme.fontBody

    header: ToolBar {
        objectName: "toolbar"
        implicitHeight: Theme.controlHeight + Theme.spacingXs * 2
        background: Rectangle {
            color: Theme.surfaceRaised
            FsDivider { anchors.bottom: parent.bottom; width: parent.width }
        }
        RowLayout {
            anchors.fill: parent
            anchors.leftMargin: Theme.spacingXs
            anchors.rightMargin: Theme.spacingXs
            spacing: Theme.spacingXs
            FsToolButton {
                objectName: "backButton"
                text: "Back"
                iconName: "back"
                visible: window.app.canGoBack && !window.wide
                onClicked: window.app.back()
            }
            FsLabel {
                objectName: "pageTitle"
                text: window.wide && window.app.page === "list" ? "Fieldsync" : window.app.title
                font.bold: true
                font.pixelSize: Theme.fontSubtitle
                elide: Text.ElideRight
                Layout.fillWidth: true
                Layout.leftMargin: Theme.spacingS
                Accessible.role: Accessible.Heading
            }
            FsToolButton {
                objectName: "searchButton"
                iconName: "search"
                visible: window.app.page !== "search" && (window.wide || window.app.page === "list")
                onClicked: window.app.open("search")
                Accessible.name: "Search all work orders"
            }
            FsToolButton {
                objectName: "newButton"
                text: "New"
                iconName: "add"
                visible: window.wide || window.app.page === "list"
                onClicked: window.app.newWorkOrder()
            }
            FsToolButton {
                id: menuButton
                objectName: "menuButton"
                iconName: "menu"
                onClicked: pageMenu.open()
                Accessible.name: "Menu"
                Menu {
                    id: pageMenu
                    y: menuButton.height
                    FsMenuItem {
                        text: "Work orders"
                        onTriggered: window.app.open("list")
                    }
                    FsMenuItem {
                        objectName: "menuSearch"
                        text: "Search all work orders"
                        onTriggered: window.app.open("search")
                    }
                    FsMenuItem {
                        objectName: "menuDead"
                        text: "Failed changes (" + window.app.status.failedCount + ")"
                        onTriggered: window.app.open("dead")
                    }
                    FsMenuItem {
                        objectName: "menuConflicts"
                        text: "Conflicts (" + window.app.status.conflictCount + ")"
                        onTriggered: window.app.open("conflict")
                    }
                    FsMenuItem {
                        objectName: "menuReview"
                        text: "Review inbox"
                        visible: window.app.review.available
                        height: visible ? implicitHeight : 0
                        onTriggered: window.app.open("review")
                    }
                    FsMenuItem {
                        objectName: "menuDiagnostics"
                        text: "Diagnostics"
                        onTriggered: window.app.open("diagnostics")
                    }
                    FsMenuItem {
                        objectName: "menuSettings"
                        text: "Settings"
                        onTriggered: window.app.open("settings")
                    }
                    FsMenuItem {
                        objectName: "menuSignIn"
                        text: "Sign in"
                        onTriggered: window.app.open("signin")
                    }
                }
            }
        }
    }

    footer: StatusBar {
        app: window.app
    }

    ColumnLayout {
        anchors.fill: parent
        spacing: 0

        // A way out of the editor would drop the person's typing: ask first, above every page.
        FsCard {
            objectName: "confirmLeaveEditor"
            tone: "warning"
            visible: window.app.askingToDiscardEdits
            Layout.fillWidth: true
            Layout.margins: Theme.spacingS
            ColumnLayout {
                width: parent.width
                PlainLabel {
                    text: "Discard your changes to this work order?"
                    font.bold: true
                    wrapMode: Text.WordWrap
                    Layout.fillWidth: true
                }
                PlainLabel {
                    text: "They are not saved yet. Keep editing to save them."
                    wrapMode: Text.WordWrap
                    Layout.fillWidth: true
                }
                RowLayout {
                    Layout.fillWidth: true
                    FsButton {
                        objectName: "keepEditingWorkOrderButton"
                        text: "Keep editing"
                        Layout.fillWidth: true
                        onClicked: window.app.keepEditing()
                    }
                    FsButton {
                        objectName: "discardWorkOrderEditsButton"
                        text: "Discard"
                        Layout.fillWidth: true
                        onClicked: window.app.discardEdits()
                    }
                }
            }
        }

        RowLayout {
            spacing: 0
            Layout.fillWidth: true
            Layout.fillHeight: true

            WorkOrderList {
                objectName: "listPane"
                app: window.app
                visible: window.wide || window.app.page === "list"
                Layout.fillHeight: true
                Layout.fillWidth: !window.wide
                Layout.preferredWidth: window.wide ? Math.min(440, window.width * 0.4) : -1
            }
            Rectangle {
                visible: window.wide
                color: Theme.divider
                Layout.fillHeight: true
                Layout.preferredWidth: Theme.borderWidth
            }
            Loader {
                id: pageLoader
                objectName: "pageLoader"
                visible: window.wide || window.app.page !== "list"
                Layout.fillWidth: true
                Layout.fillHeight: true
                sourceComponent: {
                    switch (window.app.page) {
                    case "editor": return editorPage
                    case "dead": return deadPage
                    case "diagnostics": return diagnosticsPage
                    case "signin": return signInPage
                    case "conflict": return conflictPage
                    case "review": return reviewPage
                    case "settings": return settingsPage
                    case "search": return searchPage
                    default: return window.wide ? placeholderPage : null
                    }
                }
            }
        }
    }

    Component { id: editorPage; EditorPage { app: window.app } }
    Component { id: deadPage; DeadLetterPage { app: window.app; wide: window.wide } }
    Component { id: diagnosticsPage; DiagnosticsPage { app: window.app } }
    Component { id: signInPage; SignInPage { app: window.app } }
    Component { id: conflictPage; ConflictPage { app: window.app; wide: window.wide } }
    Component { id: reviewPage; ReviewPage { app: window.app; wide: window.wide } }
    Component { id: settingsPage; SettingsPage { app: window.app } }
    Component { id: searchPage; SearchPage { app: window.app } }
    Component {
        id: placeholderPage
        Pane {
            background: Rectangle { color: Theme.window }
            FsCaption {
                anchors.centerIn: parent
                width: parent.width - 2 * Theme.spacingXl
                horizontalAlignment: Text.AlignHCenter
                font.pixelSize: Theme.fontBody
                text: "Choose a work order on the left, or press “New”."
            }
        }
    }

    // A notice that never blocks a tap: a plain item (a Popup would swallow clicks under it).
    Rectangle {
        id: toast
        objectName: "toast"
        property string text: ""
        parent: window.contentItem
        z: 100
        visible: opacity > 0
        opacity: 0
        radius: Theme.radius
        color: Theme.surfaceRaised
        border.color: Theme.divider
        border.width: Theme.borderWidth
        Accessible.role: Accessible.AlertMessage
        Accessible.name: text
        width: Math.min(toastLabel.implicitWidth + 2 * Theme.spacingXl, window.width - 2 * Theme.pageMargin)
        height: toastLabel.implicitHeight + 2 * Theme.spacingM
        x: (window.width - width) / 2
        y: parent.height - height - 12
        PlainLabel {
            id: toastLabel
            objectName: "toastText"
            anchors.centerIn: parent
            width: parent.width - 2 * Theme.spacingXl
            text: toast.text
            wrapMode: Text.WordWrap
            horizontalAlignment: Text.AlignHCenter
        }
        Behavior on opacity { NumberAnimation { duration: 150 } }
        Timer {
            id: toastTimer
            interval: 4000
            onTriggered: toast.opacity = 0
        }
        function show(message) {
            text = message
            opacity = 1
            toastTimer.restart()
        }
    }
    Connections {
        target: window.app
        function onMessage(text) { toast.show(text) }
    }
}
