// A vertical scroll bar that screen readers can name ("Scroll <what>").
import QtQuick
import QtQuick.Controls

ScrollBar {
    property string what: ""
    Accessible.name: what ? "Scroll " + what : "Scroll"
}
