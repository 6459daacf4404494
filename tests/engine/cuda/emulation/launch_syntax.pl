#!/usr/bin/perl
# Rewrites CUDA's launch syntax for the SIMT emulator (simt.h):
#   Kernel<T, N><<<grid, block, shared, stream>>>(args);   (a line break before <<< is allowed)
# becomes
#   ::temper::emulation::Launcher(Kernel<T, N>, grid, block, shared, stream)(args);
# Nothing else changes, and a #line directive keeps compiler messages pointing at the .cu file.
#   launch_syntax.pl IN.cu OUT.cpp
use strict;
use warnings;
my ($in, $out) = @ARGV;
die "usage: launch_syntax.pl IN.cu OUT.cpp\n" unless defined $out;
open(my $src, '<', $in) or die "launch_syntax.pl: $in: $!\n";
my $text = do { local $/; <$src> };
close $src;
$text =~ s/([A-Za-z_][\w:]*(?:<[^<>;]*>)?)(\s*)<<<(.*?)>>>/::temper::emulation::Launcher($1, $3)$2/gs;  # line breaks kept
open(my $dst, '>', $out) or die "launch_syntax.pl: $out: $!\n";
print $dst "#line 1 \"$in\"\n", $text;
close $dst or die "launch_syntax.pl: $out: $!\n";
