# The example program of logshard(3)'s "Event loops" section, as C: the
# lines between .EX and .EE, with roff's \e and \- made \ and -.
# Run with sed -n.
/^\.SS Event loops/,/^\.S[HS] /{
    /^\.EX/,/^\.EE/{
        /^\.E[XE]/d
        s/\\e/\\/g
        s/\\-/-/g
        p
    }
}
