# Doxygen input filter (sed -E): walbus's headers document their API in
# plain // comments, the project's comment style; this makes doxygen read
# them as documentation. docs/Doxyfile runs it on every header it reads;
# the files are not changed.
#
# Comment lines indented by three or more spaces (code samples, aligned
# lists) are shown as they are written.
s%^([ \t]*)//   %\1///     %
# The comment that opens a file documents the file.
1s%^// %/// \\file\n/// %
# A comment on lines of its own documents what follows it.
s%^([ \t]*)//( |$)%\1///\2%
# A comment after a member or an enumerator documents it.
s%([;,])([ \t]*)// %\1\2///< %
