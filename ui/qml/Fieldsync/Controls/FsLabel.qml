// Text as written, in the body size and the theme's text colour. Qt's default (AutoText) renders
// anything that looks like HTML: a title such as "Check <b>valve</b>" came out bold, and a
// conflict showed the person a value other than the one they would keep. A label meant to be
// styled says so (textFormat: Text.StyledText, its data escaped). Screen readers read it.
import QtQuick
import QtQuick.Controls

Label {
    textFormat: Text.PlainText
    color: enabled ? Theme.text : Theme.textDisabled
    font.pixelSize: Theme.fontBody
    Accessible.role: Accessible.StaticText
    Accessible.name: text
}
