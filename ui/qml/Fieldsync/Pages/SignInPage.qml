// Server address and device token; the token goes to the system keyring, never to disk here.
import QtQuick
import QtQuick.Controls
import QtQuick.Layouts
import Fieldsync.Controls

FsPage {
    id: page
    objectName: "signInPage"
    required property QtObject app
    readonly property QtObject vm: app.signIn
    maxWidth: 560

    FsLabel {
        objectName: "reasonLabel"
        visible: text !== ""
        text: page.vm.reason
        font.bold: true
        wrapMode: Text.WordWrap
        Layout.fillWidth: true
    }
    FsLabel {
        text: "Sign in with the device token your administrator gave you. The token is kept in this computer's keyring."
        wrapMode: Text.WordWrap
        Layout.fillWidth: true
    }
    FsField {
        label: "Server address"
        inputName: "serverField"
        text: page.vm.serverUrl
        placeholderText: "https://sync.example.org"
        inputMethodHints: Qt.ImhUrlCharactersOnly | Qt.ImhNoAutoUppercase
        Layout.fillWidth: true
        onEdited: (text) => page.vm.serverUrl = text
    }
    FsField {
        label: "Device token"
        inputName: "tokenField"
        echoMode: TextInput.Password
        placeholderText: "Paste the token"
        inputMethodHints: Qt.ImhSensitiveData | Qt.ImhNoPredictiveText
        Layout.fillWidth: true
        onEdited: (text) => page.vm.setToken(text)
    }
    ErrorLabel {
        objectName: "signInError"
        text: page.vm.error
        Layout.fillWidth: true
    }
    FsButton {
        objectName: "signInButton"
        text: page.vm.busy ? "Signing in…" : "Sign in"
        highlighted: true
        enabled: page.vm.canSignIn
        Layout.fillWidth: true
        onClicked: page.vm.signIn()
    }
}
