// A validation or failure message, in the theme's error colour; hidden while empty.
import QtQuick

FsLabel {
    wrapMode: Text.WordWrap
    visible: text !== ""
    color: Theme.error
    Accessible.role: Accessible.AlertMessage
}
