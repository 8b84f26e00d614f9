// A Label that shows its text as written. Qt's default (AutoText) renders anything that looks
// like HTML: a title such as "Check <b>valve</b>" came out bold, and a conflict showed the
// person a value other than the one they would keep. Pages use this for every label; a label
// that is meant to be styled says so (textFormat: Text.StyledText, its data escaped).
import QtQuick
import QtQuick.Controls

Label {
    textFormat: Text.PlainText
}
